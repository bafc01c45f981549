#include "api/deferred_b64.h"

#include <utility>

#include "api/base64.h"

namespace tensord {
namespace {
thread_local DeferredB64* g_current = nullptr;
}  // namespace

DeferredB64::DeferredB64() : outer_(g_current) {
  g_current = this;
}

DeferredB64::~DeferredB64() {
  g_current = outer_;
}

DeferredB64* DeferredB64::current() {
  return g_current;
}

void DeferredB64::add(size_t at, const void* data, size_t n, std::shared_ptr<const void> owner) {
  BodyView v;
  v.size = base64_encoded_size(n);
  v.owner = std::move(owner);
  const auto* bytes = static_cast<const unsigned char*>(data);
  // Characters [at, at + k) of the text: whole groups from bytes at / 4 * 3,
  // and the padded end when the piece reaches it.
  v.fill = [bytes, n, chars = v.size](size_t at, char* out, size_t k) {
    const size_t from = at / 4 * 3;
    const size_t count = at + k == chars ? n - from : k / 4 * 3;
    base64_encode_into(bytes + from, count, out);
  };
  values_.push_back({at, std::move(v)});
}

std::vector<BodyView> DeferredB64::body(const std::shared_ptr<rapidjson::StringBuffer>& sb) {
  std::vector<BodyView> out;
  size_t from = 0;
  auto text = [&](size_t to) {
    if (to > from) out.push_back(BodyView{sb->GetString() + from, to - from, sb, {}});
    from = to;
  };
  for (auto& v : values_) {
    text(v.at);
    out.push_back(std::move(v.view));
  }
  text(sb->GetSize());
  values_.clear();
  return out;
}

}  // namespace tensord
