#include "metrics/log.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

namespace tensord::log {

namespace {

// stderr, with info and debug lines held for at most kFlushEvery (or
// until kHoldBytes) and written together: a write(2) per line cost a tiny
// request two system calls and a wake of whoever reads the pipe. Warnings
// and errors are written at once, after what was held (flush_on), so the
// lines stay in order and what explains a failure is never held.
class HeldStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static constexpr size_t kHoldBytes = size_t{64} << 10;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    held_.append(line.data(), line.size());
    if (held_.size() >= kHoldBytes) flush_();
  }
  void flush_() override {
    size_t at = 0;
    while (at < held_.size()) {
      const ssize_t n = ::write(STDERR_FILENO, held_.data() + at, held_.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // stderr is gone: nothing else to tell
      at += static_cast<size_t>(n);
    }
    held_.clear();
  }

 private:
  std::string held_;
};

constexpr std::chrono::milliseconds kFlushEvery{20};

struct State {
  // One sink for the process, whatever the format: the flusher thread
  // holds it while configure() replaces the logger.
  std::shared_ptr<HeldStderrSink> sink = std::make_shared<HeldStderrSink>();
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

std::shared_ptr<spdlog::logger> make_logger(Format f, const std::shared_ptr<HeldStderrSink>& sink) {
  auto logger = std::make_shared<spdlog::logger>("tensord", sink);
  // Time in UTC with milliseconds; JSON lines get the rest of the object
  // from write() (the message and fields, already JSON).
  const char* pattern =
      f == Format::kJson ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})" : "%Y-%m-%dT%H:%M:%S.%eZ %l %v";
  logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc));
  logger->set_level(spdlog::level::trace);  // the level check is ours (enabled)
  logger->flush_on(spdlog::level::warn);    // a warning is on stderr when write returns
  return logger;
}

State* make_state() {
  // Never destroyed: the flusher thread and lines logged while the
  // process exits may use it after static destructors ran.
  auto* s = new State();
  s->logger = make_logger(Format::kText, s->sink);
  std::thread([sink = s->sink] {
    for (;;) {
      std::this_thread::sleep_for(kFlushEvery);
      sink->flush();
    }
  }).detach();
  std::atexit([] { flush(); });  // what is held when main returns or exit() is called
  return s;
}

State& state() {
  static State* s = make_state();
  return *s;
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
  // As printf's %.6g (the C++ standard defines it so), without its
  // locale and varargs: this runs for every request's log line.
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
  value.assign(buf, r.ptr);
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
    s.logger->flush();
    s.logger = make_logger(format, s.sink);
    s.format = format;
  }
  s.min.store(static_cast<int>(min_level));
}

void flush() {
  state().sink->flush();
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
