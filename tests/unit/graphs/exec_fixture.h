// A CPU backend, a memory account and ExecOptions over them, for executor tests.
#pragma once

#include <memory>

#include "graphs/executor.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/memory_account.h"

namespace tensord::testing_util {

struct Fixture {
  CpuBackend backend{2};
  std::shared_ptr<MemoryAccount> acct = std::make_shared<MemoryAccount>("t");
  ExecOptions opts() {
    ExecOptions o;
    o.ctx.backend = &backend;
    o.ctx.account = acct;
    o.ctx.pool = &backend.pool();
    return o;
  }
};

}  // namespace tensord::testing_util
