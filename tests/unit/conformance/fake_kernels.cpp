// "fake" kernels for a few ops, so the suite's device path (operands copied
// to a device, wrapped numbers left on the host, accepts, stored tensors
// read through, results copied back) runs on machines without a GPU. Each
// checks where its operands live, then runs the CPU arithmetic on the fake
// device's memory (host memory): the comparison is of the plumbing, not of
// device arithmetic. Registered in this test binary only.
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord::conformance {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorCode::kInternal, "fake kernel: " + what);
}

KernelFn checked(KernelFn cpu, std::string op) {
  return [cpu, op](const OpContext& ctx, const OpArgs<Tensor>& a) {
    require(ctx.backend && ctx.device.type == DeviceType::kFake, op + " ran without the fake device");
    for (const auto& list : a.tensors) {
      for (const auto& t : list) {
        const bool number = t.meta().wrapped_number && t.on_host();
        require(number || t.device().type == DeviceType::kFake,
                op + " got operand " + t.meta().str() + " on " + t.device().str());
      }
    }
    std::vector<Tensor> out = cpu(ctx, a);
    for (const auto& t : out) require(t.device().type == DeviceType::kFake, op + " returned a tensor off the device");
    return out;
  };
}

void add_fake_kernels(OpRegistry& r) {
  auto float32_operands = [](const OpArgs<TensorMeta>& a) {
    for (const auto& list : a.tensors) {
      for (const auto& m : list) {
        if (m.dtype != DType::kFloat32 && !m.wrapped_number) return false;
      }
    }
    return true;
  };
  for (const char* name : {"add", "mul", "exp", "where", "sum", "matmul", "getitem", "optim.sgd"}) {
    OpDef* d = r.find_mutable(name);
    TENSORD_ASSERT(d != nullptr);
    d->kernels["fake"] = checked(d->kernels.at("cpu"), name);
    // Like a device kernel written for some calls only: the rest fall back.
    if (std::string(name) == "add" || std::string(name) == "mul" || std::string(name) == "exp") {
      d->accepts["fake"] = float32_operands;
    }
  }
}

const KernelRegistration kFakeKernels(add_fake_kernels);

}  // namespace
}  // namespace tensord::conformance
