#include "ops/dist/spmd_infer.h"

namespace tensord::dist {

namespace {
thread_local SpmdInferContext* g_current = nullptr;
}  // namespace

SpmdInferScope::SpmdInferScope(SpmdInferContext& c) : prev_(g_current) {
  g_current = &c;
}

SpmdInferScope::~SpmdInferScope() {
  g_current = prev_;
}

SpmdInferContext* current_spmd_infer() {
  return g_current;
}

}  // namespace tensord::dist
