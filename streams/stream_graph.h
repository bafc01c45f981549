// StreamGraph: what a backend's end_capture returns: the work recorded on a stream
// between begin_capture and end_capture, instantiated once and launched any
// number of times (CUDA: a cudaGraphExec_t; CPU: the recorded host tasks).
#pragma once

#include <cstddef>

namespace tensord {

class StreamGraph {
 public:
  virtual ~StreamGraph() = default;
  // Recorded work items (CUDA graph nodes, host tasks).
  virtual size_t nodes() const = 0;
};

}  // namespace tensord
