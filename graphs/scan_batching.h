// associative_scan's parallel path, decided when the node compiles
// (graphs/control_flow.h ScanBatching): combine_fn compiled again with a
// leading batch dim, one variant per Hillis-Steele level (batch sizes
// length - d for d = 1, 2, 4, ... < length). Every node of combine_fn must
// be an elementwise op whose operands that depend on the inputs have the
// output's rank, with no stored reads or writes and no nested control flow,
// and each batched value must be exactly the unbatched one with the batch
// dim in front; otherwise the node runs the sequential algorithm.
#pragma once

#include <memory>

#include "graphs/control_flow.h"

namespace tensord {

// The batching of associative_scan node `cf`, whose combine_fn is compiled
// and whose length is known.
std::shared_ptr<const ScanBatching> plan_scan_batching(const ControlFlow& cf);

}  // namespace tensord
