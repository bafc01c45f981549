#include "metrics/log.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <memory>

namespace tensord::log {

namespace {

struct State {
  std::shared_ptr<spdlog::logger> logger;
  Format format = Format::kText;
  std::atomic<int> min{static_cast<int>(Level::kInfo)};
};

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> make_logger(Format f) {
  auto logger = std::make_shared<spdlog::logger>("tensord", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  // Time in UTC with milliseconds; JSON lines get the rest of the object
  // from write() (the message and fields, already JSON).
  const char* pattern =
      f == Format::kJson ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})" : "%Y-%m-%dT%H:%M:%S.%eZ %l %v";
  logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc));
  logger->set_level(spdlog::level::trace);  // the level check is ours (enabled)
  logger->flush_on(spdlog::level::trace);   // a line is on stderr when write returns
  return logger;
}

State& state() {
  static State s{make_logger(Format::kText)};
  return s;
}

// Text values that need quotes: empty, or with spaces, quotes, '=' or
// control characters (escaped as JSON strings are).
bool needs_quotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void write_json_string(std::string& out, std::string_view v) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  out.append(sb.GetString(), sb.GetSize());
}

}  // namespace

Field::Field(std::string_view k, double v) : key(k), number(true) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  value = buf;
}

bool parse_level(std::string_view s, Level& out) {
  if (s == "debug") {
    out = Level::kDebug;
  } else if (s == "info") {
    out = Level::kInfo;
  } else if (s == "warn") {
    out = Level::kWarn;
  } else if (s == "error") {
    out = Level::kError;
  } else {
    return false;
  }
  return true;
}

bool parse_format(std::string_view s, Format& out) {
  if (s == "text") {
    out = Format::kText;
  } else if (s == "json") {
    out = Format::kJson;
  } else {
    return false;
  }
  return true;
}

void configure(Format format, Level min_level) {
  State& s = state();
  if (format != s.format) {
    s.logger = make_logger(format);
    s.format = format;
  }
  s.min.store(static_cast<int>(min_level));
}

bool enabled(Level level) {
  return static_cast<int>(level) >= state().min.load(std::memory_order_relaxed);
}

void write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  State& s = state();
  std::string line;
  line.reserve(64 + message.size() + 24 * fields.size());
  if (s.format == Format::kJson) {
    line += "\"msg\":";
    write_json_string(line, message);
    for (const auto& f : fields) {
      line += ',';
      write_json_string(line, f.key);
      line += ':';
      if (f.number) {
        line += f.value;
      } else {
        write_json_string(line, f.value);
      }
    }
  } else {
    line.append(message);
    for (const auto& f : fields) {
      line += ' ';
      line.append(f.key);
      line += '=';
      if (!f.number && needs_quotes(f.value)) {
        write_json_string(line, f.value);
      } else {
        line += f.value;
      }
    }
  }
  s.logger->log(to_spdlog(level), "{}", line);
}

}  // namespace tensord::log
