#include "metrics/process_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace tensord {
namespace {

// Fields of /proc/self/stat after the ")" that ends comm (comm may hold
// spaces and parentheses): index 0 is field 3 (state) of proc(5).
bool read_stat_fields(std::vector<std::string>& fields) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string f;
  while (rest >> f) fields.push_back(f);
  return fields.size() > 19;
}

constexpr size_t kUtime = 14 - 3;
constexpr size_t kStime = 15 - 3;
constexpr size_t kStarttime = 22 - 3;

double boot_time_seconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double v = 0;
      in >> v;
      return v;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double now_unix() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

prometheus::MetricFamily one(const char* name, const char* help, prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

ProcessCollector::ProcessCollector() : start_time_seconds_(now_unix()) {
  std::vector<std::string> fields;
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double btime = boot_time_seconds();
  if (ticks > 0 && btime > 0 && read_stat_fields(fields)) {
    start_time_seconds_ = btime + std::stod(fields[kStarttime]) / ticks;
  }
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;

  {
    std::ifstream in("/proc/self/statm");
    double size_pages = 0, resident_pages = 0;
    if (in >> size_pages >> resident_pages) {
      double page = static_cast<double>(sysconf(_SC_PAGESIZE));
      out.push_back(one("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
                        resident_pages * page));
      out.push_back(
          one("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge, size_pages * page));
    }
  }

  std::vector<std::string> fields;
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  if (ticks > 0 && read_stat_fields(fields)) {
    double cpu = (std::stod(fields[kUtime]) + std::stod(fields[kStime])) / ticks;
    out.push_back(
        one("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", MetricType::Counter, cpu));
  }

  if (DIR* dir = opendir("/proc/self/fd")) {
    double n = 0;
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') n += 1;
    }
    closedir(dir);
    n -= 1;  // the descriptor opendir itself holds
    out.push_back(one("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, n));
  }

  {
    long max_fds = sysconf(_SC_OPEN_MAX);
    if (max_fds > 0) {
      out.push_back(one("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
                        static_cast<double>(max_fds)));
    }
  }

  out.push_back(one("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                    MetricType::Gauge, start_time_seconds_));
  return out;
}

}  // namespace tensord
