// The flight recorder's dump as JSON in PyTorch's FlightRecorder layout
// (version "2.10", API.md 8), so PyTorch's trace analyzer reads it.
// JSON belongs in api/ (DESIGN.md: JSON stays at the edge); this encoder
// lives here until GET /v1/flight-recorder is wired, then moves to api/.
#pragma once

#include <string>
#include <string_view>

#include "ops/dist/flight_recorder.h"
#include "ops/dtype.h"

namespace tensord::dist {

// PyTorch's ScalarType name (c10::toString): "Float", "Double", "Long", ...
std::string_view pytorch_scalar_type_name(DType t);

std::string flight_recorder_json(const FlightRecorderDump& dump);

}  // namespace tensord::dist
