#include "server/response_writer.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace tensord {

void ResponseWriter::begin(unsigned version, int status, std::string_view reason) {
  head_.clear();
  head_.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  char num[16];
  const auto r = std::to_chars(num, num + sizeof num, status);
  head_.append(num, r.ptr);
  head_.push_back(' ');
  head_.append(reason);
  head_.append("\r\n");
  version_ = version;
}

void ResponseWriter::field(std::string_view name, std::string_view value) {
  head_.append(name);
  head_.append(": ");
  head_.append(value);
  head_.append("\r\n");
}

void ResponseWriter::content_length(uint64_t n) {
  char num[24];
  const auto r = std::to_chars(num, num + sizeof num, n);
  field("Content-Length", std::string_view(num, static_cast<size_t>(r.ptr - num)));
}

void ResponseWriter::end_head(bool keep_alive) {
  if (version_ == 10 && keep_alive) field("Connection", "keep-alive");
  if (version_ != 10 && !keep_alive) field("Connection", "close");
  head_.append("\r\n");
  part_ = 0;
  off_ = 0;
}

void ResponseWriter::body(std::string text, std::vector<BodyView> views) {
  body_ = std::move(text);
  views_ = std::move(views);
}

bool ResponseWriter::plain(size_t k, const char*& data, size_t& size) const {
  if (k == 0) {
    data = head_.data();
    size = head_.size();
    return true;
  }
  if (k == 1) {
    data = body_.data();
    size = body_.size();
    return true;
  }
  const BodyView& v = views_[k - 2];
  if (v.fill && v.size != 0) return false;
  data = static_cast<const char*>(v.data);
  size = v.data == nullptr ? 0 : v.size;
  return true;
}

size_t ResponseWriter::next(iovec* out, size_t max) {
  // Parts with nothing left to send are stepped over first, so that done()
  // tells the truth once the last byte went.
  size_t n = 0;
  for (size_t k = part_; k < parts() && n < max; ++k) {
    const char* data = nullptr;
    size_t size = 0;
    if (!plain(k, data, size)) {
      if (n != 0) break;  // what came before it goes first
      // Here k == part_: consume() leaves part_ on a part with bytes to send.
      const BodyView& v = views_[k - 2];
      if (scratch_at_ == scratch_len_) {  // make the next piece
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        scratch_len_ = std::min(kScratchBytes, v.size - off_);
        scratch_at_ = 0;
        v.fill(off_, scratch_.data(), scratch_len_);
      }
      out[n++] = {scratch_.data() + scratch_at_, scratch_len_ - scratch_at_};
      break;
    }
    const size_t from = k == part_ ? off_ : 0;
    if (from < size) out[n++] = {const_cast<char*>(data) + from, size - from};  // NOLINT: iovec is not const
  }
  return n;
}

void ResponseWriter::consume(size_t n) {
  while (part_ < parts()) {
    const char* data = nullptr;
    size_t size = 0;
    if (!plain(part_, data, size)) {
      const size_t take = std::min(n, scratch_len_ - scratch_at_);
      scratch_at_ += take;
      n -= take;
      if (scratch_at_ < scratch_len_) return;
      off_ += scratch_len_;
      scratch_len_ = scratch_at_ = 0;
      if (off_ < views_[part_ - 2].size) return;  // the next piece is made by next()
    } else {
      const size_t take = std::min(n, size - off_);
      off_ += take;
      n -= take;
      if (off_ < size) return;
    }
    ++part_;
    off_ = 0;
  }
}

void ResponseWriter::clear() {
  body_.clear();
  views_.clear();
  part_ = 0;
  off_ = 0;
  scratch_len_ = scratch_at_ = 0;
}

}  // namespace tensord
