// The memory captured graphs replay in (API.md 4.3): chunks of device memory
// charged to the tenant, each holding one planned buffer of a graph at a
// time. Graphs created with `pool: <id>` share one pool: a graph binds its
// buffers to chunks already there when they are large enough (none of its
// own buffers share a chunk) and adds chunks for the rest, so the pool holds
// what the largest of them needs, not their sum (PyTorch's
// Graph(pool=other.pool())). Chunks are freed when the pool and every graph
// bound to it are gone. Graphs sharing a pool replay one at a time: their
// intermediates overwrite each other. The engine admits one replay of the
// pool at a time (gate(): the others wait there, holding no thread) and the
// admitted one runs under run_mutex (a guard for direct callers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "graphs/serial_gate.h"
#include "ops/backend.h"
#include "ops/memory_account.h"
#include "ops/tensor.h"

namespace tensord {

class GraphPool {
 public:
  // Chunks are allocated on `backend`/`device` (host memory when backend is
  // null), charged to `account` (may be null).
  GraphPool(Backend* backend, Device device, std::shared_ptr<MemoryAccount> account)
      : backend_(backend), device_(device), account_(std::move(account)) {}
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;

  // One distinct chunk (a uint8 tensor of at least sizes[i] bytes) per
  // requested buffer: existing chunks first (best fit), new ones for the
  // rest. Throws quota_exceeded with nothing added. Thread-safe.
  std::vector<Tensor> bind(const std::vector<size_t>& sizes);
  // Bytes of every chunk (charged to the account).
  int64_t reserved() const;
  size_t chunks() const;
  std::mutex& run_mutex() { return run_mu_; }
  const std::shared_ptr<MemoryAccount>& account() const { return account_; }
  SerialGate& gate() { return gate_; }

 private:
  Backend* backend_;
  Device device_;
  std::shared_ptr<MemoryAccount> account_;
  mutable std::mutex mu_;
  std::vector<Tensor> chunks_;
  int64_t reserved_ = 0;
  std::mutex run_mu_;
  SerialGate gate_;
};

}  // namespace tensord
