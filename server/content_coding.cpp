#include "server/content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "ops/error.h"
#include "server/stream_inflater.h"

namespace tensord {
namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Owns a z_stream and ends it however the caller leaves.
struct Deflater {
  z_stream z{};
  bool ok = false;
  explicit Deflater(int bits) { ok = deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) == Z_OK; }
  ~Deflater() {
    if (ok) deflateEnd(&z);
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
};

}  // namespace

const char* coding_name(ContentCoding c) {
  return c == ContentCoding::kGzip ? "gzip" : "deflate";
}

int zlib_window_bits(ContentCoding c) {
  return c == ContentCoding::kGzip ? 15 + 16 : 15;
}

std::optional<ContentCoding> request_coding(const std::string& content_encoding) {
  const std::string c = lower_trimmed(content_encoding);
  if (c.empty() || c == "identity") return std::nullopt;
  if (c == "gzip" || c == "x-gzip") return ContentCoding::kGzip;
  if (c == "deflate") return ContentCoding::kDeflate;
  throw Error(ErrorCode::kBadRequest, "Content-Encoding '" + content_encoding.substr(0, 32) +
                                          "' is not supported: send gzip, deflate or identity");
}

std::optional<ContentCoding> accepted_coding(const std::string& accept_encoding) {
  bool gzip = false, deflate = false;
  std::string_view rest = accept_encoding;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t semi = item.find(';');
    const std::string coding = lower_trimmed(item.substr(0, semi));
    bool refused = false;
    if (semi != std::string_view::npos) {
      const std::string param = lower_trimmed(item.substr(semi + 1));
      // q=0, q=0.0, q=0.000: refused; any other weight accepts.
      if (param.rfind("q=", 0) == 0) {
        std::string_view q = std::string_view(param).substr(2);
        refused = !q.empty() && q.find_first_not_of("0.") == std::string_view::npos;
      }
    }
    if (refused) continue;
    if (coding == "gzip" || coding == "x-gzip") gzip = true;
    if (coding == "deflate") deflate = true;
  }
  if (gzip) return ContentCoding::kGzip;
  if (deflate) return ContentCoding::kDeflate;
  return std::nullopt;
}

std::string inflate_body(std::string_view in, ContentCoding coding, size_t max_bytes,
                         const std::function<void(size_t total)>& on_grow, size_t grow_step) {
  StreamInflater inflater(coding, max_bytes, in.size() * 4, on_grow, grow_step);
  inflater.feed(in);
  return inflater.finish();
}

void compress_response(HttpResponse& resp, ContentCoding coding) {
  if (resp.body_size() == 0) return;
  Deflater def(zlib_window_bits(coding));
  if (!def.ok) throw Error(ErrorCode::kInternal, "zlib: deflateInit2 failed");
  std::string out;
  out.resize(deflateBound(&def.z, static_cast<uLong>(resp.body_size())) + 64);
  size_t have = 0;
  auto feed = [&](const char* data, size_t n, bool last) {
    def.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));  // NOLINT: zlib's API is not const
    def.z.avail_in = static_cast<uInt>(n);
    for (;;) {
      if (have == out.size()) out.resize(out.size() * 2);
      def.z.next_out = reinterpret_cast<Bytef*>(out.data() + have);
      const size_t room = std::min<size_t>(out.size() - have, 1u << 30);
      def.z.avail_out = static_cast<uInt>(room);
      const int rc = deflate(&def.z, last ? Z_FINISH : Z_NO_FLUSH);
      have += room - def.z.avail_out;
      if (rc == Z_STREAM_END) return;
      if (rc != Z_OK && rc != Z_BUF_ERROR) throw Error(ErrorCode::kInternal, "zlib: deflate failed");
      if (!last && def.z.avail_in == 0) return;
    }
  };
  // Pieces of at most 256 MiB (zlib counts in 32 bits).
  auto feed_range = [&](const char* data, size_t n, bool last) {
    constexpr size_t kPiece = size_t{256} << 20;
    do {
      const size_t k = std::min(n, kPiece);
      feed(data, k, last && k == n);
      data += k;
      n -= k;
    } while (n > 0);
  };
  std::vector<char> fill_buf;
  const size_t pieces = 1 + resp.views.size();
  for (size_t i = 0; i < pieces; ++i) {
    const bool last = i + 1 == pieces;
    if (i == 0) {
      feed_range(resp.body.data(), resp.body.size(), last);
      continue;
    }
    const BodyView& v = resp.views[i - 1];
    if (v.data != nullptr || !v.fill) {
      feed_range(static_cast<const char*>(v.data), v.data ? v.size : 0, last);
      continue;
    }
    constexpr size_t kFillChunk = 1 << 20;  // a multiple of BodyView::kFillAlign
    fill_buf.resize(kFillChunk);
    size_t at = 0;
    do {
      const size_t k = std::min(kFillChunk, v.size - at);
      v.fill(at, fill_buf.data(), k);
      at += k;
      feed(fill_buf.data(), k, last && at == v.size);
    } while (at < v.size);
  }
  out.resize(have);
  resp.body = std::move(out);
  resp.views.clear();
  resp.headers.emplace_back("Content-Encoding", coding_name(coding));
  resp.headers.emplace_back("Vary", "Accept-Encoding");
}

}  // namespace tensord
