#include "server/request_target.h"

#include "ops/error.h"

namespace tensord {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string percent_decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
      int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        throw Error(ErrorCode::kBadRequest, "invalid percent-escape in request target");
      }
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') throw Error(ErrorCode::kBadRequest, "NUL byte in request target");
    out += c;
  }
  return out;
}

void parse_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query) {
  if (target.empty() || target[0] != '/') {
    throw Error(ErrorCode::kBadRequest, "request target must be an absolute path");
  }
  size_t q = target.find('?');
  std::string_view raw_path = target.substr(0, q);
  if (raw_path.find('#') != std::string_view::npos) {
    throw Error(ErrorCode::kBadRequest, "fragment in request target");
  }
  path = percent_decode(raw_path, false);
  query.clear();
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view item = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = percent_decode(item.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? std::string{} : percent_decode(item.substr(eq + 1), true);
    query[std::move(key)] = std::move(value);
  }
}

}  // namespace tensord
