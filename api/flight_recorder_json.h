// The flight recorder's dump as JSON in PyTorch's FlightRecorder layout
// (version "2.10", API.md 8), so PyTorch's trace analyzer reads it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ops/dist/flight_recorder.h"
#include "ops/dtype.h"

namespace tensord::dist {

// PyTorch's ScalarType name (c10::toString): "Float", "Double", "Long", ...
std::string_view pytorch_scalar_type_name(DType t);
// A group's ranks as PyTorch writes them in pg_config, a string: "[0, 1]"
// (fr_trace reads it with ast.literal_eval).
std::string pytorch_ranks_str(const std::vector<int>& ranks);

std::string flight_recorder_json(const FlightRecorderDump& dump);
// GET /v1/flight-recorder without ?rank: {"ranks": {"0": dump, ...}}.
std::string flight_recorder_ranks_json(const std::vector<FlightRecorderDump>& dumps);

}  // namespace tensord::dist
