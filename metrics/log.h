// The server's log (API.md 10): one line per event on stderr, as text
// (`<time> <level> <message> key=value ...`) or as one JSON object per line
// (--log-format json), below a minimum level (--log-level). Each line is
// formatted on the calling thread (the time's seconds formatted once per
// second per thread) and appended to one buffer under a lock: a tiny
// request writes two lines, so the line is most of what logging costs.
// Info and debug lines are held up to 20 ms (or 64 KiB) and
// written together; a warning or an error is written at once with what
// was held, and everything held is written at exit. Thread-safe once
// configured: configure() runs before threads.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tensord::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "debug|info|warn|error" and "text|json"; false for anything else.
bool parse_level(std::string_view s, Level& out);
bool parse_format(std::string_view s, Format& out);

// Sets the format and the lowest level written (default: text, info).
void configure(Format format, Level min_level);
bool enabled(Level level);
// Writes what is held now.
void flush();

// One field of an event: a string (quoted where needed) or a number. A
// string is viewed, not copied: a Field lives only in the braces of the
// call that writes it.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v ? v : "") {}
  template <std::integral T>
  Field(std::string_view k, T v) : key(k), number(true) {
    if constexpr (std::is_same_v<T, bool>) {
      value = v ? "true" : "false";
    } else {
      const auto r = std::to_chars(num_, num_ + sizeof num_, v);
      value = std::string_view(num_, static_cast<size_t>(r.ptr - num_));
    }
  }
  Field(std::string_view k, double v);
  Field(const Field&) = delete;  // `value` may view num_
  Field& operator=(const Field&) = delete;
  ~Field() = default;
  std::string_view key;
  std::string_view value;
  bool number = false;

 private:
  char num_[32] = {};
};

// Writes one event, whatever the minimum level (info() and the others check it).
void write(Level level, std::string_view message, std::initializer_list<Field> fields = {});

inline void debug(std::string_view m, std::initializer_list<Field> f = {}) {
  if (enabled(Level::kDebug)) write(Level::kDebug, m, f);
}
inline void info(std::string_view m, std::initializer_list<Field> f = {}) {
  if (enabled(Level::kInfo)) write(Level::kInfo, m, f);
}
inline void warn(std::string_view m, std::initializer_list<Field> f = {}) {
  if (enabled(Level::kWarn)) write(Level::kWarn, m, f);
}
inline void error(std::string_view m, std::initializer_list<Field> f = {}) {
  if (enabled(Level::kError)) write(Level::kError, m, f);
}

}  // namespace tensord::log
