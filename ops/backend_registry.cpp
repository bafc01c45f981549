// Every compiled-in backend, in one place (STYLE.md 4). CPU is always there.
#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#if defined(TENSORD_HAVE_CUDA)
#include "ops/cuda/cuda_backend.h"
#endif

namespace tensord {

std::unique_ptr<Backend> make_backend(std::string_view name, int threads, std::string* why_not) {
  if (name == "cpu") return std::make_unique<CpuBackend>(threads);
#if defined(TENSORD_HAVE_CUDA)
  if (name == "cuda") return make_cuda_backend(why_not);  // nullptr without a usable device
#endif
  if (why_not) *why_not = "backend '" + std::string(name) + "' is not compiled into this binary";
  return nullptr;
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> out{"cpu"};  // the test-only fake backend is not a server backend
#if defined(TENSORD_HAVE_CUDA)
  out.emplace_back("cuda");
#endif
  return out;
}

}  // namespace tensord
