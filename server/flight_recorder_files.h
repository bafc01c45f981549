// The flight recorders written to the state dir when a collective timed
// out (API.md 8), one pair of files per local rank g, each replaced
// atomically (a temp file in the state dir, then a rename):
//   <state-dir>/flight-recorder/rank_<g>   PyTorch's pickle dump, the
//       folder fr_trace reads as is:
//       python -m torch.distributed.flight_recorder.fr_trace
//           <state-dir>/flight-recorder --prefix rank_   (one line)
//   <state-dir>/flight-recorder-rank<g>.json  the same dump as JSON (the
//       route's form), for readers without Python: a JSON file is safe to
//       open from anywhere, a pickle is not.
// The folder holds nothing else (fr_trace loads every file in it whose
// name holds the prefix), so the temp files live beside it.
#pragma once

#include <string>

namespace tensord {

class RankWorkers;

inline constexpr const char* kFlightRecorderFolder = "flight-recorder";
inline constexpr const char* kFlightRecorderPrefix = "rank_";

// Logs (never throws) when a file cannot be written. Safe to call from
// several threads at once (they take turns).
void write_flight_recorders(RankWorkers& ranks, const std::string& dir);

}  // namespace tensord
