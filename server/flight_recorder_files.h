// The flight recorders written to the state dir when a collective timed
// out (API.md 8): flight-recorder-rank<g>.json per local rank, in
// PyTorch's dump layout, replaced atomically each time.
#pragma once

#include <string>

namespace tensord {

class RankWorkers;

// Logs (never throws) when a file cannot be written.
void write_flight_recorders(RankWorkers& ranks, const std::string& dir);

}  // namespace tensord
