#include "api/json_numbers.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

#include <rapidjson/document.h>

#include "api/json_parse.h"
#include "api/json_scan.h"
#include "ops/dtype.h"
#include "ops/error.h"

namespace tensord {
namespace {

constexpr size_t kMaxRankFast = 16;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The offset just past the array that starts at `at`, found a memchr at a
// time: the ']' whose '['s before it close its own; npos if none. Anything
// but numbers in it (a string, which may hold brackets) is left to the
// reader, which takes only numbers, commas and brackets, and must end here.
size_t numbers_array_end(std::string_view s, size_t at) {
  if (at >= s.size() || s[at] != '[') return std::string_view::npos;
  const char* const base = s.data();
  const char* p = base + at;
  const char* const end = base + s.size();
  int64_t depth = 0;
  while (const void* found = std::memchr(p, ']', static_cast<size_t>(end - p))) {
    const char* close = static_cast<const char*>(found);
    for (const void* o = std::memchr(p, '[', static_cast<size_t>(close - p)); o != nullptr;
         o = std::memchr(static_cast<const char*>(o) + 1, '[',
                         static_cast<size_t>(close - static_cast<const char*>(o) - 1))) {
      ++depth;
    }
    if (--depth == 0) return static_cast<size_t>(close - base) + 1;
    p = close + 1;
  }
  return std::string_view::npos;
}

// Powers of ten a double holds exactly (Clinger's fast path).
constexpr double kExactPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// Whether the 8 characters at `p` are all digits; if so their value in
// `*value`. Each step adds neighbours within the word: bytes to pairs
// (x10), pairs to fours (x100), fours to the eight (x10000); no lane
// carries into the next.
bool eight_digits(const char* p, uint64_t* value) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // p[0] in the low byte (little-endian, checked below)
  const uint64_t d = v - 0x3030303030303030;
  // Every byte in '0'..'9': the high nibble 3, and adding 6 keeps it 3.
  if ((v & 0xf0f0f0f0f0f0f0f0) != 0x3030303030303030 ||
      ((v + 0x0606060606060606) & 0xf0f0f0f0f0f0f0f0) != 0x3030303030303030) {
    return false;
  }
  uint64_t x = (d * 10 + (d >> 8)) & 0x00ff00ff00ff00ff;  // 2-digit values in bytes 0, 2, 4, 6
  x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffff;         // 4-digit values in 16-bit lanes 0 and 2
  *value = (x * 10000 + (x >> 32)) & 0xffffffff;
  return true;
}
static_assert(std::endian::native == std::endian::little, "eight_digits reads the first character from the low byte");

// m * 10^e10 correctly rounded to a double, for a mantissa past 2^53 (the
// 17-digit text of a double): one multiplication or division in x87's
// 64-bit mantissa (m and 10^|e10| <= 10^27 exact there, so one rounding),
// then to 53 bits. That second rounding is the correct one unless the
// extended result lies within one of its units of a point halfway between
// two doubles (its 11 dropped bits 0x3ff..0x401): then false, from_chars
// decides. The range keeps every result normal. x86-64 only (elsewhere
// false).
bool extended_exact(uint64_t m, int e10, double* out) {
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
  static const auto kPow10 = [] {
    std::array<long double, 28> p{};
    p[0] = 1.0L;
    for (size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] * 10.0L;  // exact: 5^27 < 2^64
    return p;
  }();
  const auto v = static_cast<long double>(m);
  const long double r = e10 >= 0 ? v * kPow10[static_cast<size_t>(e10)] : v / kPow10[static_cast<size_t>(-e10)];
  uint64_t bits;
  std::memcpy(&bits, &r, sizeof bits);  // the x87 significand, integer bit included
  const uint64_t dropped = bits & 0x7ff;
  if (dropped >= 0x3ff && dropped <= 0x401) return false;
  *out = static_cast<double>(r);
  return true;
#else
  (void)m;
  (void)e10;
  (void)out;
  return false;
#endif
}

class Reader {
 public:
  Reader(const char* p, const char* end) : p_(p), end_(end) {}

  void skip() {
    while (p_ < end_ && json_space(*p_)) ++p_;
  }
  bool take(char c) {
    skip();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skip();
    return p_ < end_ && *p_ == c;
  }

  // A JSON number literal as the DOM path reads it (json_parse.cpp's
  // RawNumber, then GetDouble): integral literals through int64/uint64,
  // the rest through from_chars; out of range: false (the DOM path decides).
  //
  // Read in one pass: the literal's digits go into a 64-bit mantissa as
  // its grammar is checked. A fraction or exponent whose mantissa is at
  // most 2^53 and whose power of ten is at most 22 either way is one exact
  // multiplication or division (correctly rounded, as from_chars is:
  // Clinger); an integral literal of at most 18 digits is its int64. The
  // rest (17-digit reprs of doubles among them) goes to from_chars.
  bool number(double* out) {
    skip();
    const char* s = p_;
    const char* q = p_;
    const bool neg = q < end_ && *q == '-';
    if (neg) ++q;
    if (q >= end_) return false;
    uint64_t m = 0;
    int sig = 0;  // significant digits in m (leading zeros are not); 20: more than m holds
    const char* digits = q;
    if (*q == '0') {
      ++q;
    } else if (*q >= '1' && *q <= '9') {
      q = take_digits(q, m, sig);
      // RapidJSON refuses an integer part near DBL_MAX: left to it.
      if (q - digits > 300) return false;
    } else {
      return false;
    }
    bool integral = true;
    int64_t e10 = 0;
    if (q < end_ && *q == '.') {
      integral = false;
      ++q;
      if (q >= end_ || !is_digit(*q)) return false;
      const char* frac = q;
      q = take_digits(q, m, sig);
      e10 = -(q - frac);
    }
    if (q < end_ && (*q == 'e' || *q == 'E')) {
      integral = false;
      ++q;
      const bool minus = q < end_ && *q == '-';
      if (q < end_ && (*q == '+' || *q == '-')) ++q;
      if (q >= end_ || !is_digit(*q)) return false;
      int exp = 0;
      while (q < end_ && is_digit(*q)) {
        exp = std::min(exp * 10 + (*q - '0'), 100000);
        ++q;
      }
      // RapidJSON refuses a positive exponent past ~308 even for a zero
      // ("0e1010"): left to it.
      if (!minus && exp > 300) return false;
      e10 += minus ? -exp : exp;
    }
    p_ = q;
    if (sig <= 19) {
      if (integral && q - digits <= 18) {
        const auto i = static_cast<int64_t>(m);
        *out = static_cast<double>(neg ? -i : i);  // "-0" is the integer 0, as the DOM path reads it
        return true;
      }
      if (!integral && m <= (uint64_t{1} << 53) && e10 >= -22 && e10 <= 22) {
        const double v = static_cast<double>(m);
        const double r = e10 >= 0 ? v * kExactPow10[e10] : v / kExactPow10[-e10];
        *out = neg ? -r : r;
        return true;
      }
      if (!integral && e10 >= -27 && e10 <= 27 && extended_exact(m, static_cast<int>(e10), out)) {
        if (neg) *out = -*out;
        return true;
      }
    }
    if (integral) {
      if (neg) {
        int64_t i;
        auto r = std::from_chars(s, q, i);
        if (r.ec == std::errc() && r.ptr == q) {
          *out = static_cast<double>(i);
          return true;
        }
      } else {
        uint64_t u;
        auto r = std::from_chars(s, q, u);
        if (r.ec == std::errc() && r.ptr == q) {
          *out = static_cast<double>(u);
          return true;
        }
      }
    }
    auto r = std::from_chars(s, q, *out);
    return r.ec == std::errc() && r.ptr == q;
  }

  bool at_end() {
    skip();
    return p_ == end_;
  }

 private:
  // The digits from `q` into the mantissa `m` (sig: as number() keeps it),
  // eight at a time while eight are digits; returns the first non-digit.
  const char* take_digits(const char* q, uint64_t& m, int& sig) const {
    if (sig == 0) {
      while (q < end_ && *q == '0') ++q;  // leading zeros: not significant
    }
    uint64_t eight = 0;
    while (end_ - q >= 8 && eight_digits(q, &eight)) {
      if (sig <= 11) {
        m = m * 100000000 + eight;
        sig += 8;
      } else {
        sig = 20;
      }
      q += 8;
    }
    while (q < end_ && is_digit(*q)) {
      if (sig < 19) {
        m = m * 10 + static_cast<uint64_t>(*q - '0');
        ++sig;
      } else {
        sig = 20;
      }
      ++q;
    }
    return q;
  }

  const char* p_;
  const char* end_;
};

template <class T>
class Filler {
 public:
  Filler(Reader& r, T* out, const Shape& shape) : r_(r), out_(out), shape_(shape) {}

  // `count` numbers separated by commas, then ']' (the '[' was taken).
  bool flat(int64_t count) {
    for (int64_t k = 0; k < count; ++k) {
      if (k > 0 && !r_.take(',')) return false;
      double d;
      if (!r_.number(&d)) return false;
      out_[next_++] = static_cast<T>(d);
    }
    return r_.take(']');
  }

  // Level `d` of nesting along the shape (its '[' was taken).
  bool nested(size_t d) {
    const int64_t count = shape_[d];
    if (d + 1 == shape_.size()) return flat(count);
    for (int64_t k = 0; k < count; ++k) {
      if (k > 0 && !r_.take(',')) return false;
      if (!r_.take('[') || !nested(d + 1)) return false;
    }
    return r_.take(']');
  }

 private:
  Reader& r_;
  T* out_;
  const Shape& shape_;
  int64_t next_ = 0;
};

}  // namespace

std::optional<Tensor> numeric_tensor_fast(std::string_view body) {
  const size_t at = top_level_value(body, "data");
  if (at == kJsonMore || at == kJsonAbsent) return std::nullopt;
  const size_t end = numbers_array_end(body, at);
  if (end == std::string_view::npos) return std::nullopt;
  // The JSON around the array, with [] in its place.
  std::string rest;
  rest.reserve(body.size() - (end - at) + 2);
  rest.append(body.substr(0, at)).append("[]").append(body.substr(end));
  rapidjson::Document doc;
  try {
    parse_json(rest, doc, "body");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!doc.IsObject()) return std::nullopt;
  const rapidjson::Value* dtype_v = nullptr;
  const rapidjson::Value* shape_v = nullptr;
  int data_keys = 0;
  for (const auto& m : doc.GetObject()) {
    const std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "dtype" && !dtype_v) {
      dtype_v = &m.value;
    } else if (key == "shape" && !shape_v) {
      shape_v = &m.value;
    } else if (key == "data") {
      ++data_keys;
    } else if (key != "name") {
      return std::nullopt;  // "datatype", "b64", a key given twice, an unknown key: the DOM path
    }
  }
  if (!dtype_v || !dtype_v->IsString() || data_keys != 1) return std::nullopt;
  const std::optional<DType> dtype =
      dtype_from_name(std::string_view(dtype_v->GetString(), dtype_v->GetStringLength()));
  if (!dtype || (*dtype != DType::kFloat32 && *dtype != DType::kFloat64)) return std::nullopt;

  Shape shape;
  bool flat = true;
  Reader r(body.data() + at, body.data() + end);
  r.take('[');
  const bool nested_data = r.peek('[');
  if (shape_v) {
    if (!shape_v->IsArray() || shape_v->Size() == 0 || shape_v->Size() > kMaxRankFast) return std::nullopt;
    for (const auto& d : shape_v->GetArray()) {
      if (!d.IsInt64() || d.GetInt64() <= 0) return std::nullopt;
      shape.push_back(d.GetInt64());
    }
    flat = !nested_data;
    if (nested_data && shape.size() == 1) return std::nullopt;
  } else {
    if (nested_data) return std::nullopt;  // the shape is read off the nesting: the DOM path
    shape.push_back(0);
  }
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d > (int64_t{1} << 40) / numel) return std::nullopt;
    numel *= d;
  }
  // Each number takes a character and a comma: a shape the text cannot
  // fill is not allocated (the DOM path names the mismatch).
  const auto chars = static_cast<int64_t>(end - at);
  if (shape_v && numel > chars / 2 + 1) return std::nullopt;
  if (!shape_v) {
    // Flat without a shape: count the commas.
    int64_t commas = 0;
    for (size_t i = at; i < end; ++i) commas += body[i] == ',' ? 1 : 0;
    shape[0] = commas + 1;
    numel = shape[0];
  }

  Tensor t = Tensor::empty_host(*dtype, shape);
  const bool ok = *dtype == DType::kFloat32 ? (flat ? Filler<float>(r, t.data_ptr<float>(), shape).flat(numel)
                                                    : Filler<float>(r, t.data_ptr<float>(), shape).nested(0))
                                            : (flat ? Filler<double>(r, t.data_ptr<double>(), shape).flat(numel)
                                                    : Filler<double>(r, t.data_ptr<double>(), shape).nested(0));
  if (!ok || !r.at_end()) return std::nullopt;
  return t;
}

}  // namespace tensord
