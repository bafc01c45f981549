// Where a program's nodes run beside a device backend (CUDA, fake), and how
// values follow them (ggml-sched's fallback, per node):
//  - a node runs on the backend's kernel when the op has one, else on the
//    CPU kernel over host memory;
//  - a value moves to the device when a device kernel takes it and to the
//    host when a CPU kernel takes it, at most once each way per job (the
//    copies are cached per value until the value is released);
//  - results stay where their kernel put them: a stored tensor written by a
//    device kernel lives on the device from then on.
// With the CPU backend everything is host memory and nothing here runs.
// One job thread at a time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "ops/op_registry.h"

namespace tensord {

class DevicePlacement {
 public:
  // `ctx`: the job's context (its backend, device and account); `values`:
  // how many values the program has.
  DevicePlacement(const OpContext& ctx, size_t values);

  // True when the backend is a device backend (not "cpu", not none).
  bool active() const { return active_; }
  // The kernel node `b` of `cp` runs: the backend's when it has one that
  // accepts the call, else the CPU one (*host set); null when neither exists.
  const KernelFn* kernel(const BoundNode& b, const CompiledProgram& cp, bool* host) const;
  // Value `v`, currently `t`, where a kernel on the host (or the device)
  // takes it. v == SIZE_MAX: not a program value, not cached. A wrapped
  // Python number stays in host memory either way: device kernels take it
  // as a launch argument.
  Tensor place(size_t v, const Tensor& t, bool host);
  // Drops the cached copy of value `v` (released by the memory plan).
  void forget(size_t v);
  // The context a CPU kernel runs with: host allocations charged to the
  // job's account, stored tensors read through to the host.
  const OpContext& host_ctx(StoredIO* stored);

 private:
  // Reads stored tensors as host tensors (a CPU kernel beside a device).
  class HostStoredIO final : public StoredIO {
   public:
    StoredIO* inner = nullptr;
    std::optional<Tensor> read(const std::string& name) const override;
    void write(const std::string& name, Tensor t) override { inner->write(name, std::move(t)); }
  };

  OpContext ctx_;
  OpContext host_ctx_;
  HostStoredIO host_stored_;
  bool active_ = false;
  std::vector<Tensor> copies_;  // per value: its copy on the other side
};

}  // namespace tensord
