// Kernels for placement tests on the fake backend, registered in any test
// binary that includes this header (once per binary): "fake" kernels for add,
// mul and lt, for float32 inputs only and capture-safe, that refuse any
// operand not on the fake device (a wrapped number stays on the host), and
// CPU kernels for
// exp and optim.sgd that refuse any operand (or stored tensor read) not in
// host memory. Every other op falls back to its CPU kernel.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "ops/backend.h"
#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord::testing_util {

inline std::atomic<int> g_fake_calls{0};  // fake kernel calls so far

namespace fake_device_detail {

inline void require(bool ok, const char* what) {
  if (!ok) throw Error(ErrorCode::kInternal, what);
}

inline void add_fake_kernels(OpRegistry& r) {
  for (const char* name : {"add", "mul", "lt"}) {
    OpDef* d = r.find_mutable(name);
    TENSORD_ASSERT(d != nullptr);
    KernelFn cpu = d->kernels.at("cpu");
    // The fake device's memory is host memory, so the CPU arithmetic runs on
    // it as is; the checks are what a real device kernel would need.
    d->kernels["fake"] = [cpu](const OpContext& ctx, const OpArgs<Tensor>& a) {
      require(ctx.backend && ctx.device.type == DeviceType::kFake, "fake kernel without the fake device");
      for (const auto& list : a.tensors) {
        for (const auto& t : list) {
          const bool number = t.meta().wrapped_number && t.on_host();  // a launch argument
          require(number || t.device().type == DeviceType::kFake, "fake kernel got a host operand");
        }
      }
      ++g_fake_calls;
      return cpu(ctx, a);
    };
    // Like a device kernel written for float32 only: other calls fall back.
    d->accepts["fake"] = [](const OpArgs<TensorMeta>& a) { return a.tensor(0).dtype == DType::kFloat32; };
    d->capture_safe.insert("fake");
  }
  OpDef* e = r.find_mutable("exp");
  KernelFn cpu = e->kernels.at("cpu");
  e->kernels["cpu"] = [cpu](const OpContext& ctx, const OpArgs<Tensor>& a) {
    for (const auto& list : a.tensors) {
      for (const auto& t : list) require(t.on_host(), "CPU kernel got a device operand");
    }
    require(!ctx.backend || ctx.backend->name() == "cpu", "CPU kernel allocating on a device");
    return cpu(ctx, a);
  };
  OpDef* sgd = r.find_mutable("optim.sgd");
  KernelFn sgd_cpu = sgd->kernels.at("cpu");
  sgd->kernels["cpu"] = [sgd_cpu](const OpContext& ctx, const OpArgs<Tensor>& a) {
    for (const auto& t : a.list(0)) require(t.on_host(), "CPU optimizer got a device parameter");
    if (ctx.stored) {
      for (const auto& n : a.names[0]) {
        std::optional<Tensor> t = ctx.stored->read(n.substr(std::string("$stored/").size()));
        require(!t || t->on_host(), "CPU optimizer read a device-resident stored tensor");
      }
    }
    return sgd_cpu(ctx, a);
  };
}

}  // namespace fake_device_detail

inline const KernelRegistration kFakeDeviceKernels(fake_device_detail::add_fake_kernels);

}  // namespace tensord::testing_util
