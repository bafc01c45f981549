// Every compiled-in backend, in one place (STYLE.md 4). CPU is always there.
#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/fake/fake_backend.h"
#if defined(TENSORD_HAVE_CUDA)
#include "ops/cuda/cuda_backend.h"
#endif

namespace tensord {

std::unique_ptr<Backend> make_backend(std::string_view name, int threads) {
  if (name == "cpu") return std::make_unique<CpuBackend>(threads);
  if (name == "fake") return std::make_unique<FakeBackend>();
#if defined(TENSORD_HAVE_CUDA)
  if (name == "cuda") return make_cuda_backend();  // nullptr without a device
#endif
  return nullptr;
}

std::vector<std::string> compiled_backends() {
  std::vector<std::string> out{"cpu", "fake"};
#if defined(TENSORD_HAVE_CUDA)
  out.emplace_back("cuda");
#endif
  return out;
}

}  // namespace tensord
