// PickleWriter: a Python pickle of plain values (dict, list, tuple, str,
// int, float, bool, None), written as a stream the way RapidJSON's Writer
// writes JSON, for files that Python tools load with pickle.load (PyTorch's
// flight-recorder analyzer). Protocol 2: every Python 3 reads it, and it
// needs no framing or memo. Only plain opcodes are written (no GLOBAL,
// REDUCE or BUILD), so a loader that allows no classes loads it and
// loading runs no code.
//
// Bounds: nesting is at most kMaxDepth (a fixed stack, no allocation per
// container); a list's or dict's items are flushed every kBatch items, as
// Python's own pickler does, so the loader's stack stays small; the output
// is one std::string that grows as written. Strings are UTF-8: invalid
// bytes become U+FFFD, since Python's loader refuses a str that does not
// decode. Misuse (a container left open, a key that is a container, a dict
// with a key and no value) is a bug and asserts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tensord {

class PickleWriter {
 public:
  static constexpr int kProtocol = 2;
  static constexpr size_t kMaxDepth = 32;
  static constexpr size_t kBatch = 1000;

  explicit PickleWriter(size_t reserve_bytes = 0);

  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();
  // A tuple's items are all on the loader's stack until end_tuple(): keep
  // tuples short (they are for small records such as (name, desc)).
  void begin_tuple();
  void end_tuple();

  void str(std::string_view s);
  void int64(int64_t v);
  void uint64(uint64_t v);
  void float64(double v);
  void boolean(bool v);
  void none();

  // The pickle (with its STOP), once every container is closed; the writer
  // then starts a new one.
  std::string finish();

  size_t depth() const { return depth_; }
  size_t size() const { return out_.size(); }

 private:
  enum class Kind : uint8_t { kDict, kList, kTuple };
  struct Frame {
    Kind kind;
    size_t items;    // values written into it so far
    size_t pending;  // items since its last flush (MARK)
  };

  void begin(Kind kind);
  void scalar();          // before a scalar value: counts it
  void container_item();  // before a container value: counts it, checks it is not a key
  void count_item();
  void flush(Frame& f);  // APPENDS / SETITEMS and a new MARK
  void byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void le32(uint32_t v);

  std::string out_;
  std::array<Frame, kMaxDepth> stack_{};
  size_t depth_ = 0;
  bool have_top_ = false;  // a top-level value was written
};

}  // namespace tensord
