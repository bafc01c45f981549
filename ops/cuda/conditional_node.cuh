// torch.cond and while_loop inside a captured CUDA graph (CUDA >= 12.4): a
// conditional IF or WHILE node is appended to the graph a stream is
// capturing; its handle is set on the device from a bool tensor by a
// one-thread kernel (cudaGraphSetConditional), so replays take the branch
// the data says with no host round trip. The bodies are captured on a
// second stream with cudaStreamBeginCaptureToGraph; the outer capture goes
// on after the node.
//
//   ConditionalNode n(s, ConditionalNode::Kind::kIf, pred);     // captured on s
//   cudaStream_t b = n.begin_body(0); ...then work on b...; n.end_body();
//   b = n.begin_body(1); ...else work...; n.end_body();
//   // WHILE: body 0 only; end it with n.set_condition_from(pred) on b.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tensord::cuda {

// Sets `handle` to (*pred != 0), on `stream` (captured as a kernel node).
void launch_set_condition(cudaStream_t stream, cudaGraphConditionalHandle handle, const bool* pred);

class ConditionalNode {
 public:
  enum class Kind { kIf, kWhile };
  // `stream` must be capturing (throws otherwise). IF nodes have two bodies
  // (then, else), WHILE nodes one; the predicate is read before the node.
  ConditionalNode(cudaStream_t stream, Kind kind, const bool* pred);
  ~ConditionalNode();
  ConditionalNode(const ConditionalNode&) = delete;
  ConditionalNode& operator=(const ConditionalNode&) = delete;

  int bodies() const { return kind_ == Kind::kIf ? 2 : 1; }
  // Starts capturing body `i` on the returned stream; end_body() ends it.
  cudaStream_t begin_body(int i);
  // WHILE: re-evaluates the loop condition at the end of the body.
  void set_condition_from(const bool* pred);
  // WHILE, the same with a bound: state[0] counts body runs; once it
  // reaches max_iters with *pred still true the loop stops and state[1] is
  // set to 1 (the caller reports it). state is zeroed before the node.
  void set_loop_condition(const bool* pred, int64_t* state, int64_t max_iters);
  void end_body();
  cudaGraphNode_t node() const { return node_; }

 private:
  Kind kind_;
  cudaGraphConditionalHandle handle_{};
  cudaGraphNode_t node_ = nullptr;
  cudaGraph_t body_graphs_[2] = {nullptr, nullptr};
  cudaStream_t body_stream_ = nullptr;
  int capturing_body_ = -1;
};

}  // namespace tensord::cuda
