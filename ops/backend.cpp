// The optional capabilities' defaults (backend.h): partitions are a no-op
// and partition streams plain streams; capture and host functions are
// unsupported.
#include "ops/backend.h"

#include "ops/error.h"

namespace tensord {

namespace {
[[noreturn]] void unsupported(const Backend& b, const char* what) {
  throw Error(ErrorCode::kUnsupported, "backend " + std::string(b.name()) + " does not support " + what);
}
}  // namespace

ThreadStreamBinding::ThreadStreamBinding(Backend* b, Stream s) : b_(b) {
  if (b_) b_->bind_thread_stream(s);
}
ThreadStreamBinding::~ThreadStreamBinding() {
  if (b_) b_->unbind_thread_stream();
}

void Backend::set_partitions(const std::vector<PartitionSpec>&) {}
Stream Backend::create_partition_stream(Device d, int) {
  return create_stream(d);
}

// By value, as the overrides take the function over (this default has none to take).
// NOLINTNEXTLINE(performance-unnecessary-value-param)
void Backend::launch_host_func(Stream, std::function<void()>) {
  unsupported(*this, "host functions on streams");
}
void Backend::begin_capture(Stream) {
  unsupported(*this, "stream capture");
}
std::shared_ptr<StreamGraph> Backend::end_capture(Stream) {
  unsupported(*this, "stream capture");
}
void Backend::launch_graph(Stream, const StreamGraph&) {
  unsupported(*this, "graph launch");
}
std::unique_ptr<CapturedConditional> Backend::begin_conditional(Stream, ConditionalKind, const void*, void*) {
  unsupported(*this, "conditional graph nodes");
}

}  // namespace tensord
