#include "server/flight_recorder_files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "api/flight_recorder_json.h"
#include "metrics/log.h"
#include "ops/dist/flight_recorder.h"
#include "scheduler/rank_workers.h"

namespace tensord {

void write_flight_recorders(RankWorkers& ranks, const std::string& dir) {
  for (int r = 0; r < ranks.size(); ++r) {
    const dist::FlightRecorderDump d = ranks.recorder(r)->dump();
    const std::filesystem::path path =
        std::filesystem::path(dir) / ("flight-recorder-rank" + std::to_string(d.rank) + ".json");
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << dist::flight_recorder_json(d);
      if (!f) {
        log::error("could not write the flight recorder", {{"path", tmp.string()}});
        continue;
      }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      log::error("could not write the flight recorder", {{"path", path.string()}, {"error", ec.message()}});
    } else {
      log::warn("a collective timed out: flight recorder written", {{"path", path.string()}});
    }
  }
}

}  // namespace tensord
