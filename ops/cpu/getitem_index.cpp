#include "ops/cpu/getitem_index.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void bad_index(std::string_view text, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "getitem: bad index '" + std::string(text) + "': " + why);
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

int64_t parse_int(std::string_view whole, std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) bad_index(whole, "integer '" + std::string(s) + "' out of range");
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) {
    bad_index(whole, "expected an integer, a slice, '...' or 'None', got '" + std::string(s) + "'");
  }
  return v;
}

IndexItem parse_item(std::string_view whole, std::string_view s) {
  IndexItem it;
  if (s == "...") {
    it.kind = IndexItem::Kind::kEllipsis;
    return it;
  }
  if (s == "None") {
    it.kind = IndexItem::Kind::kNewAxis;
    return it;
  }
  size_t c1 = s.find(':');
  if (c1 == std::string_view::npos) {
    it.kind = IndexItem::Kind::kInt;
    it.index = parse_int(whole, s);
    return it;
  }
  it.kind = IndexItem::Kind::kSlice;
  std::string_view start = trim(s.substr(0, c1));
  std::string_view rest = s.substr(c1 + 1);
  size_t c2 = rest.find(':');
  std::string_view stop = trim(c2 == std::string_view::npos ? rest : rest.substr(0, c2));
  std::string_view step = c2 == std::string_view::npos ? std::string_view{} : trim(rest.substr(c2 + 1));
  if (c2 != std::string_view::npos && rest.substr(c2 + 1).find(':') != std::string_view::npos) {
    bad_index(whole, "a slice has at most two ':'");
  }
  if (!start.empty()) {
    it.has_start = true;
    it.start = parse_int(whole, start);
  }
  if (!stop.empty()) {
    it.has_stop = true;
    it.stop = parse_int(whole, stop);
  }
  if (!step.empty()) {
    it.has_step = true;
    it.step = parse_int(whole, step);
    if (it.step <= 0) bad_index(whole, "slice step must be greater than zero");
  }
  return it;
}

}  // namespace

std::vector<IndexItem> parse_index(std::string_view text) {
  std::vector<IndexItem> items;
  std::string_view rest = trim(text);
  if (rest.empty()) return items;
  for (;;) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) bad_index(text, "empty item");
    items.push_back(parse_item(text, item));
    if (comma == std::string_view::npos) break;
    rest = trim(rest.substr(comma + 1));
    if (rest.empty()) break;  // one trailing comma: "0," is x[0,]
  }
  return items;
}

std::vector<IndexItem> index_from_attr(const Attr& a) {
  if (a.is_string()) return parse_index(a.to_string("getitem: index"));
  if (a.is_int() || a.is_int_list()) {
    std::vector<IndexItem> items;
    for (int64_t v : a.to_int_list("getitem: index")) {
      IndexItem it;
      it.index = v;
      items.push_back(it);
    }
    return items;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "getitem: index must be a string like \"0, 1:3, ..., None\", an int or a list of ints");
}

IndexedView apply_index(const std::vector<IndexItem>& items, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t consumed = 0, ellipses = 0;
  for (const auto& it : items) {
    if (it.kind == IndexItem::Kind::kInt || it.kind == IndexItem::Kind::kSlice) ++consumed;
    if (it.kind == IndexItem::Kind::kEllipsis) ++ellipses;
  }
  if (ellipses > 1)
    throw Error(ErrorCode::kInvalidArgument, "getitem: an index can only have a single ellipsis ('...')");
  if (consumed > rank) {
    throw Error(ErrorCode::kInvalidArgument, "getitem: too many indices for tensor of dimension " +
                                                 std::to_string(rank) + " (got " + std::to_string(consumed) + ")");
  }
  const std::vector<int64_t> in_strides = contiguous_strides(shape);
  IndexedView v;
  int64_t d = 0;  // next source dim
  auto keep = [&](int64_t count) {
    for (int64_t k = 0; k < count; ++k, ++d) {
      v.shape.push_back(shape[static_cast<size_t>(d)]);
      v.strides.push_back(in_strides[static_cast<size_t>(d)]);
    }
  };
  for (const auto& it : items) {
    switch (it.kind) {
      case IndexItem::Kind::kEllipsis:
        keep(rank - consumed);
        break;
      case IndexItem::Kind::kNewAxis:
        v.shape.push_back(1);
        v.strides.push_back(0);
        break;
      case IndexItem::Kind::kInt: {
        const int64_t size = shape[static_cast<size_t>(d)];
        if (it.index < -size || it.index >= size) {
          throw Error(ErrorCode::kInvalidArgument, "getitem: index " + std::to_string(it.index) +
                                                       " is out of bounds for dimension " + std::to_string(d) +
                                                       " with size " + std::to_string(size));
        }
        const int64_t i = it.index < 0 ? it.index + size : it.index;
        v.offset += i * in_strides[static_cast<size_t>(d)];
        ++d;
        break;
      }
      case IndexItem::Kind::kSlice: {
        const int64_t size = shape[static_cast<size_t>(d)];
        if (it.step <= 0) throw Error(ErrorCode::kInvalidArgument, "getitem: slice step must be greater than zero");
        auto clamp = [size](int64_t b) {
          if (b < 0) b = b < -size ? 0 : b + size;
          return std::min(b, size);
        };
        const int64_t start = it.has_start ? clamp(it.start) : 0;
        const int64_t stop = it.has_stop ? clamp(it.stop) : size;
        // A step past the end selects one element; capping it keeps
        // stride * step far from overflow.
        const int64_t step = std::min(it.step, std::max<int64_t>(size, 1));
        const int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
        if (len > 0) v.offset += start * in_strides[static_cast<size_t>(d)];
        v.shape.push_back(len);
        v.strides.push_back(in_strides[static_cast<size_t>(d)] * step);
        ++d;
        break;
      }
    }
  }
  keep(rank - d);
  return v;
}

}  // namespace tensord
