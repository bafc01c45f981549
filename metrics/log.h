// The server's log (API.md 10): one line per event on stderr, as text
// (`<time> <level> <message> key=value ...`) or as one JSON object per line
// (--log-format json), below a minimum level (--log-level). Written through
// spdlog (Debian's libspdlog-dev); this header keeps spdlog out of the
// includers. Info and debug lines are held up to 20 ms (or 64 KiB) and
// written together; a warning or an error is written at once with what
// was held, and everything held is written at exit. Thread-safe once
// configured: configure() runs before threads.
#pragma once

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

// One field of an event: a string (quoted where needed) or a number.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v ? v : "") {}
  template <std::integral T>
  Field(std::string_view k, T v)
      : key(k), value(std::is_same_v<T, bool> ? (v ? "true" : "false") : std::to_string(v)), number(true) {}
  Field(std::string_view k, double v);
  std::string_view key;
  std::string value;
  bool number = false;
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
