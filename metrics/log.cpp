#include "metrics/log.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

namespace tensord::log {

namespace {

// stderr, with info and debug lines held for at most kFlushEvery (or
// until kHoldBytes) and written together: a write(2) per line cost a tiny
// request two system calls and a wake of whoever reads the pipe. Warnings
// and errors are written at once, after what was held, so the lines stay
// in order and what explains a failure is never held.
class HeldStderr {
 public:
  static constexpr size_t kHoldBytes = size_t{64} << 10;

  void append(std::string_view line, bool now) {
    std::lock_guard lock(mu_);
    held_.append(line);
    if (now || held_.size() >= kHoldBytes) flush_locked();
  }
  void flush() {
    std::lock_guard lock(mu_);
    flush_locked();
  }

 private:
  void flush_locked() {
    size_t at = 0;
    while (at < held_.size()) {
      const ssize_t n = ::write(STDERR_FILENO, held_.data() + at, held_.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // stderr is gone: nothing else to tell
      at += static_cast<size_t>(n);
    }
    held_.clear();
  }

  std::mutex mu_;
  std::string held_;
};

constexpr std::chrono::milliseconds kFlushEvery{20};

struct State {
  HeldStderr sink;
  std::atomic<Format> format{Format::kText};
  std::atomic<int> min{static_cast<int>(Level::kInfo)};
};

State* make_state() {
  // Never destroyed: the flusher thread and lines logged while the
  // process exits may use it after static destructors ran.
  auto* s = new State();
  std::thread([s] {
    for (;;) {
      std::this_thread::sleep_for(kFlushEvery);
      s->sink.flush();
    }
  }).detach();
  std::atexit([] { flush(); });  // what is held when main returns or exit() is called
  return s;
}

State& state() {
  static State* s = make_state();
  return *s;
}

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

// The time in UTC with milliseconds, "2026-12-04T01:02:03.456Z": the part
// up to the seconds is formatted once per second on each thread.
void append_time(std::string& out) {
  struct Second {
    time_t at = -1;
    char text[24] = {};
  };
  thread_local Second cached;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  const time_t sec = static_cast<time_t>(ms / 1000);
  if (sec != cached.at) {
    std::tm tm{};
    gmtime_r(&sec, &tm);
    std::strftime(cached.text, sizeof cached.text, "%Y-%m-%dT%H:%M:%S", &tm);
    cached.at = sec;
  }
  out.append(cached.text);
  const int milli = static_cast<int>(ms % 1000);
  const char frac[6] = {'.',
                        static_cast<char>('0' + milli / 100),
                        static_cast<char>('0' + milli / 10 % 10),
                        static_cast<char>('0' + milli % 10),
                        'Z',
                        '\0'};
  out.append(frac, 5);
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
  thread_local rapidjson::StringBuffer sb;
  sb.Clear();
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  out.append(sb.GetString(), sb.GetSize());
}

}  // namespace

Field::Field(std::string_view k, double v) : key(k), number(true) {
  // As printf's %.6g (the C++ standard defines it so), without its
  // locale and varargs: this runs for every request's log line.
  const auto r = std::to_chars(num_, num_ + sizeof num_, v, std::chars_format::general, 6);
  value = std::string_view(num_, static_cast<size_t>(r.ptr - num_));
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
  s.sink.flush();  // what was held keeps the format it was written in
  s.format.store(format);
  s.min.store(static_cast<int>(min_level));
}

void flush() {
  state().sink.flush();
}

bool enabled(Level level) {
  return static_cast<int>(level) >= state().min.load(std::memory_order_relaxed);
}

void write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  State& s = state();
  thread_local std::string line;  // its capacity kept from line to line
  line.clear();
  if (s.format.load(std::memory_order_relaxed) == Format::kJson) {
    line += "{\"ts\":\"";
    append_time(line);
    line += "\",\"level\":\"";
    line += level_name(level);
    line += "\",\"msg\":";
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
    line += '}';
  } else {
    append_time(line);
    line += ' ';
    line += level_name(level);
    line += ' ';
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
  line += '\n';
  s.sink.append(line, level >= Level::kWarn);
}

}  // namespace tensord::log
