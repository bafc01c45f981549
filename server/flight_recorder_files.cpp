#include "server/flight_recorder_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>

#include "api/flight_recorder_json.h"
#include "api/flight_recorder_pickle.h"
#include "metrics/log.h"
#include "ops/dist/flight_recorder.h"
#include "scheduler/rank_workers.h"

namespace tensord {

namespace fs = std::filesystem;

namespace {

// `bytes` to `path` through `tmp` (same file system, so the rename is
// atomic: a reader sees the old file or the new one, never half of one).
bool write_atomically(const fs::path& path, const fs::path& tmp, std::string_view bytes) {
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      log::error("could not write the flight recorder", {{"path", tmp.string()}});
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    log::error("could not write the flight recorder", {{"path", path.string()}, {"error", ec.message()}});
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace

void write_flight_recorders(RankWorkers& ranks, const std::string& dir) {
  // Two ranks' timeouts may fire at once; one writer at a time keeps the
  // temp files apart. The pid keeps them apart from another server's.
  static std::mutex mu;
  std::lock_guard lock(mu);
  const fs::path root(dir);
  const fs::path folder = root / kFlightRecorderFolder;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec)
    log::error("could not create the flight recorder folder", {{"path", folder.string()}, {"error", ec.message()}});
  const std::string tmp_stem = ".flight-recorder." + std::to_string(::getpid()) + ".";
  for (int r = 0; r < ranks.size(); ++r) {
    const dist::FlightRecorderDump d = ranks.recorder(r)->dump();
    const std::string g = std::to_string(d.rank);
    const fs::path pickle = folder / (kFlightRecorderPrefix + g);
    if (!ec && write_atomically(pickle, root / (tmp_stem + g + ".pickle.tmp"), dist::flight_recorder_pickle(d))) {
      log::warn("a collective timed out: flight recorder written", {{"path", pickle.string()}});
    }
    const fs::path json = root / ("flight-recorder-rank" + g + ".json");
    if (write_atomically(json, root / (tmp_stem + g + ".json.tmp"), dist::flight_recorder_json(d))) {
      log::warn("a collective timed out: flight recorder written", {{"path", json.string()}});
    }
  }
}

}  // namespace tensord
