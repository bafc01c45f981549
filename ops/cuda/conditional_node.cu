#include "ops/cuda/conditional_node.cuh"

#include "ops/cuda/cuda_check.h"
#include "ops/error.h"

namespace tensord::cuda {

namespace {
__global__ void set_condition_kernel(cudaGraphConditionalHandle handle, const bool* pred) {
  cudaGraphSetConditional(handle, *pred ? 1u : 0u);
}

__global__ void loop_condition_kernel(cudaGraphConditionalHandle handle, const bool* pred, int64_t* state,
                                      int64_t max_iters) {
  bool again = *pred;
  const int64_t runs = ++state[0];
  if (again && runs >= max_iters) {
    state[1] = 1;
    again = false;
  }
  cudaGraphSetConditional(handle, again ? 1u : 0u);
}
}  // namespace

void launch_set_condition(cudaStream_t stream, cudaGraphConditionalHandle handle, const bool* pred) {
  set_condition_kernel<<<1, 1, 0, stream>>>(handle, pred);
  TENSORD_CUDA_CHECK(cudaGetLastError());
}

ConditionalNode::ConditionalNode(cudaStream_t stream, Kind kind, const bool* pred) : kind_(kind) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  TENSORD_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph));
  if (status != cudaStreamCaptureStatusActive) {
    throw Error(ErrorCode::kInternal, "a conditional node needs a capturing stream");
  }
  // The handle starts at 0 on every launch; the kernel below sets it.
  TENSORD_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle_, graph, 0, cudaGraphCondAssignDefault));
  launch_set_condition(stream, handle_, pred);

  // The node depends on what the stream has captured so far (the kernel).
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t ndeps = 0;
  TENSORD_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &deps, &edges, &ndeps));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle_;
  params.conditional.type = kind == Kind::kIf ? cudaGraphCondTypeIf : cudaGraphCondTypeWhile;
  params.conditional.size = static_cast<unsigned>(bodies());
  TENSORD_CUDA_CHECK(cudaGraphAddNode(&node_, graph, deps, edges, ndeps, &params));
  for (int i = 0; i < bodies(); ++i) body_graphs_[i] = params.conditional.phGraph_out[i];
  // Later work on the outer stream runs after the whole node.
  TENSORD_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, &node_, nullptr, 1, cudaStreamSetCaptureDependencies));
  TENSORD_CUDA_CHECK(cudaStreamCreateWithFlags(&body_stream_, cudaStreamNonBlocking));
}

ConditionalNode::~ConditionalNode() {
  if (capturing_body_ >= 0) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(body_stream_, &g);  // abandoned body: end it quietly
  }
  if (body_stream_) cudaStreamDestroy(body_stream_);
}

cudaStream_t ConditionalNode::begin_body(int i) {
  if (i < 0 || i >= bodies() || capturing_body_ >= 0) {
    throw Error(ErrorCode::kInternal, "conditional node: bad body index or a body is still open");
  }
  TENSORD_CUDA_CHECK(cudaStreamBeginCaptureToGraph(body_stream_, body_graphs_[i], nullptr, nullptr, 0,
                                                   cudaStreamCaptureModeThreadLocal));
  capturing_body_ = i;
  return body_stream_;
}

void ConditionalNode::set_condition_from(const bool* pred) {
  if (kind_ != Kind::kWhile || capturing_body_ < 0) {
    throw Error(ErrorCode::kInternal, "conditional node: set_condition_from is for an open WHILE body");
  }
  launch_set_condition(body_stream_, handle_, pred);
}

void ConditionalNode::set_loop_condition(const bool* pred, int64_t* state, int64_t max_iters) {
  if (kind_ != Kind::kWhile || capturing_body_ < 0) {
    throw Error(ErrorCode::kInternal, "conditional node: set_loop_condition is for an open WHILE body");
  }
  loop_condition_kernel<<<1, 1, 0, body_stream_>>>(handle_, pred, state, max_iters);
  TENSORD_CUDA_CHECK(cudaGetLastError());
}

void ConditionalNode::end_body() {
  if (capturing_body_ < 0) throw Error(ErrorCode::kInternal, "conditional node: no body is open");
  cudaGraph_t g = nullptr;
  TENSORD_CUDA_CHECK(cudaStreamEndCapture(body_stream_, &g));
  capturing_body_ = -1;
}

}  // namespace tensord::cuda
