#include "api/pickle_writer.h"

#include <bit>
#include <limits>

#include "ops/error.h"

namespace tensord {

namespace {

// Pickle opcodes (Python's Lib/pickletools.py documents each).
constexpr uint8_t kProto = 0x80;
constexpr uint8_t kStop = '.';
constexpr uint8_t kMark = '(';
constexpr uint8_t kEmptyDict = '}';
constexpr uint8_t kEmptyList = ']';
constexpr uint8_t kSetItems = 'u';
constexpr uint8_t kAppends = 'e';
constexpr uint8_t kTuple = 't';
constexpr uint8_t kNone = 'N';
constexpr uint8_t kNewTrue = 0x88;
constexpr uint8_t kNewFalse = 0x89;
constexpr uint8_t kBinInt1 = 'K';     // 1-byte unsigned
constexpr uint8_t kBinInt2 = 'M';     // 2-byte unsigned, little-endian
constexpr uint8_t kBinInt = 'J';      // 4-byte signed, little-endian
constexpr uint8_t kLong1 = 0x8a;      // 1-byte length, then two's complement little-endian
constexpr uint8_t kBinFloat = 'G';    // 8-byte IEEE double, big-endian
constexpr uint8_t kBinUnicode = 'X';  // 4-byte length, then UTF-8

bool cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// The length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_len(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const size_t left = s.size() - i;
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (left < n || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (!cont(at(k))) return 0;
  }
  return n;
}

}  // namespace

PickleWriter::PickleWriter(size_t reserve_bytes) {
  out_.reserve(reserve_bytes + 3);
  byte(kProto);
  byte(static_cast<uint8_t>(kProtocol));
}

void PickleWriter::le32(uint32_t v) {
  for (int i = 0; i < 4; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
}

void PickleWriter::flush(Frame& f) {
  byte(f.kind == Kind::kDict ? kSetItems : kAppends);
  byte(kMark);
  f.pending = 0;
}

void PickleWriter::count_item() {
  if (depth_ == 0) {
    TENSORD_ASSERT(!have_top_);
    have_top_ = true;
    return;
  }
  Frame& f = stack_[depth_ - 1];
  // kBatch is even, so a dict is flushed between a value and the next key.
  if (f.kind != Kind::kTuple && f.pending == kBatch) flush(f);
  ++f.pending;
  ++f.items;
}

void PickleWriter::scalar() {
  count_item();
}

void PickleWriter::container_item() {
  // A dict key must be hashable: this writer's keys are scalars only.
  TENSORD_ASSERT(depth_ == 0 || stack_[depth_ - 1].kind != Kind::kDict || stack_[depth_ - 1].items % 2 == 1);
  count_item();
}

void PickleWriter::begin(Kind kind) {
  container_item();
  TENSORD_ASSERT(depth_ < kMaxDepth);
  if (kind == Kind::kDict) byte(kEmptyDict);
  if (kind == Kind::kList) byte(kEmptyList);
  byte(kMark);
  stack_[depth_++] = Frame{kind, 0, 0};
}

void PickleWriter::begin_dict() {
  begin(Kind::kDict);
}
void PickleWriter::begin_list() {
  begin(Kind::kList);
}
void PickleWriter::begin_tuple() {
  begin(Kind::kTuple);
}

void PickleWriter::end_dict() {
  TENSORD_ASSERT(depth_ > 0 && stack_[depth_ - 1].kind == Kind::kDict && stack_[depth_ - 1].items % 2 == 0);
  byte(kSetItems);
  --depth_;
}

void PickleWriter::end_list() {
  TENSORD_ASSERT(depth_ > 0 && stack_[depth_ - 1].kind == Kind::kList);
  byte(kAppends);
  --depth_;
}

void PickleWriter::end_tuple() {
  TENSORD_ASSERT(depth_ > 0 && stack_[depth_ - 1].kind == Kind::kTuple);
  byte(kTuple);
  --depth_;
}

void PickleWriter::str(std::string_view s) {
  scalar();
  TENSORD_ASSERT(s.size() <= std::numeric_limits<uint32_t>::max() / 3);
  byte(kBinUnicode);
  const size_t len_at = out_.size();
  le32(0);  // patched below: replacements can change the length
  const size_t start = out_.size();
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (n == 0) {
      out_ += "\xEF\xBF\xBD";  // U+FFFD for one invalid byte
      ++i;
    } else {
      out_.append(s.data() + i, n);
      i += n;
    }
  }
  const auto len = static_cast<uint32_t>(out_.size() - start);
  for (int i = 0; i < 4; ++i) out_[len_at + static_cast<size_t>(i)] = static_cast<char>(len >> (8 * i));
}

void PickleWriter::int64(int64_t v) {
  scalar();
  if (v >= 0 && v < 0x100) {
    byte(kBinInt1);
    byte(static_cast<uint8_t>(v));
  } else if (v >= 0 && v < 0x10000) {
    byte(kBinInt2);
    byte(static_cast<uint8_t>(v));
    byte(static_cast<uint8_t>(v >> 8));
  } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
    byte(kBinInt);
    le32(static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    // The fewest two's-complement bytes whose top bit is the sign.
    const auto u = static_cast<uint64_t>(v);
    size_t n = 8;
    while (n > 1) {
      const auto top = static_cast<uint8_t>(u >> (8 * (n - 1)));
      const auto next = static_cast<uint8_t>(u >> (8 * (n - 2)));
      const bool redundant = (top == 0x00 && !(next & 0x80)) || (top == 0xFF && (next & 0x80));
      if (!redundant) break;
      --n;
    }
    byte(kLong1);
    byte(static_cast<uint8_t>(n));
    for (size_t i = 0; i < n; ++i) byte(static_cast<uint8_t>(u >> (8 * i)));
  }
}

void PickleWriter::uint64(uint64_t v) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    int64(static_cast<int64_t>(v));
    return;
  }
  scalar();
  byte(kLong1);
  byte(9);  // a zero sign byte above the eight
  for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
  byte(0);
}

void PickleWriter::float64(double v) {
  scalar();
  byte(kBinFloat);
  const auto bits = std::bit_cast<uint64_t>(v);
  for (int i = 7; i >= 0; --i) byte(static_cast<uint8_t>(bits >> (8 * i)));
}

void PickleWriter::boolean(bool v) {
  scalar();
  byte(v ? kNewTrue : kNewFalse);
}

void PickleWriter::none() {
  scalar();
  byte(kNone);
}

std::string PickleWriter::finish() {
  TENSORD_ASSERT(depth_ == 0 && have_top_);
  byte(kStop);
  std::string out = std::move(out_);
  out_.clear();
  byte(kProto);
  byte(static_cast<uint8_t>(kProtocol));
  have_top_ = false;
  return out;
}

}  // namespace tensord
