// The flight recorder's dump as the pickle file PyTorch's ProcessGroupNCCL
// writes (FlightRecorder layout "2.10"), the form PyTorch's analyzer
// (python -m torch.distributed.flight_recorder.fr_trace) loads from a
// folder of files named <prefix><rank>. Plain types only (PickleWriter).
// The layout is in docs/api-notes.md ("Flight recorder").
#pragma once

#include <string>

#include "ops/dist/flight_recorder.h"

namespace tensord::dist {

std::string flight_recorder_pickle(const FlightRecorderDump& dump);

}  // namespace tensord::dist
