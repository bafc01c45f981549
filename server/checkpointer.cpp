#include "server/checkpointer.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "metrics/log.h"
#include "metrics/metrics.h"
#include "ops/error.h"
#include "scheduler/tenant.h"
#include "scheduler/tenant_registry.h"

namespace tensord {

namespace {
struct CheckpointMetrics {
  prometheus::Family<prometheus::Counter>& total = prometheus::BuildCounter()
                                                       .Name("tensord_checkpoints_total")
                                                       .Help("Checkpoints written, by tenant and result (ok, error)")
                                                       .Register(metrics_registry());
  prometheus::Family<prometheus::Gauge>& last_ok =
      prometheus::BuildGauge()
          .Name("tensord_checkpoint_last_success_timestamp_seconds")
          .Help("Unix time of the tenant's last successful checkpoint (its state dir file matches its tensors)")
          .Register(metrics_registry());

  static CheckpointMetrics& get() {
    static CheckpointMetrics m;
    return m;
  }
  void ok(const std::string& tenant) {
    total.Add({{"tenant", tenant}, {"result", "ok"}}).Increment();
    last_ok.Add({{"tenant", tenant}}).SetToCurrentTime();
  }
  void failed(const std::string& tenant) { total.Add({{"tenant", tenant}, {"result", "error"}}).Increment(); }
};
}  // namespace

Checkpointer::Checkpointer(std::string dir, TenantRegistry* tenants) : dir_(std::move(dir)), tenants_(tenants) {
  if (!enabled()) return;
  CheckpointMetrics& m = CheckpointMetrics::get();
  for (Tenant* t : tenants_->all()) {  // series at 0 from the start: alerts work before the first failure
    m.total.Add({{"tenant", t->name}, {"result", "ok"}});
    m.total.Add({{"tenant", t->name}, {"result", "error"}});
  }
}

Checkpointer::~Checkpointer() {
  stop_timer();
}

std::mutex& Checkpointer::lock_of(const std::string& tenant) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& p = locks_[tenant];
  if (!p) p = std::make_unique<std::mutex>();
  return *p;
}

CheckpointInfo Checkpointer::write(const Tenant& tenant, std::string_view why) {
  if (!enabled()) throw Error(ErrorCode::kUnavailable, "no --state-dir: checkpoints are off");
  std::lock_guard<std::mutex> lk(lock_of(tenant.name));
  const auto t0 = std::chrono::steady_clock::now();
  CheckpointInfo ci;
  try {
    ci = write_checkpoint(dir_, tenant);
  } catch (const Error& e) {
    CheckpointMetrics::get().failed(tenant.name);
    log::error("checkpoint failed", {{"tenant", tenant.name}, {"why", why}, {"error", e.message()}});
    throw;
  } catch (const std::exception& e) {
    CheckpointMetrics::get().failed(tenant.name);
    log::error("checkpoint failed", {{"tenant", tenant.name}, {"why", why}, {"error", e.what()}});
    throw Error(ErrorCode::kInternal, std::string("checkpoint: ") + e.what());
  }
  {
    std::lock_guard<std::mutex> ml(mu_);
    written_[tenant.name] = ci.version;
  }
  CheckpointMetrics::get().ok(tenant.name);
  log::info(
      "checkpoint written",
      {{"tenant", tenant.name},
       {"why", why},
       {"tensors", ci.tensors},
       {"bytes", ci.bytes},
       {"path", ci.path},
       {"duration_ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()}});
  return ci;
}

int Checkpointer::write_all(std::string_view why) {
  if (!enabled()) return 0;
  int failures = 0;
  for (Tenant* t : tenants_->all_with_retired()) {  // tenants removed by a reload keep their tensors
    bool unchanged = false;
    {
      std::lock_guard<std::mutex> ml(mu_);
      auto it = written_.find(t->name);
      unchanged = it != written_.end() && it->second == t->store.version();
    }
    if (unchanged) {
      CheckpointMetrics::get().last_ok.Add({{"tenant", t->name}}).SetToCurrentTime();  // the file is current
      continue;
    }
    try {
      write(*t, why);
    } catch (const std::exception&) {
      ++failures;  // counted and logged by write
    }
  }
  return failures;
}

void Checkpointer::restore(Tenant& tenant) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lk(lock_of(tenant.name));
  RestoreInfo ri = restore_checkpoint(dir_, tenant);
  if (ri.removed_temps) {
    log::warn("removed temp files of interrupted checkpoints", {{"tenant", tenant.name}, {"files", ri.removed_temps}});
  }
  if (!ri.skipped.empty()) {
    log::error("checkpoint skipped: the file is torn or corrupt; nothing of it was loaded",
               {{"tenant", tenant.name}, {"path", ri.path}, {"error", ri.skipped}});
    return;
  }
  if (ri.tensors == 0) return;
  {
    std::lock_guard<std::mutex> ml(mu_);
    written_[tenant.name] = tenant.store.version();  // the file matches the store
  }
  if (ri.over_quota) {
    log::warn("checkpoint restored past the tenant's memory quota: new writes fail until usage is under it",
              {{"tenant", tenant.name}, {"bytes", ri.bytes}, {"limit", tenant.account->limit()}});
  }
  log::info("checkpoint restored",
            {{"tenant", tenant.name}, {"tensors", ri.tensors}, {"bytes", ri.bytes}, {"path", ri.path}});
}

void Checkpointer::start_timer(std::chrono::seconds every) {
  if (!enabled() || every.count() <= 0 || timer_.joinable()) return;
  timer_ = std::thread([this, every] {
    std::unique_lock<std::mutex> lk(timer_mu_);
    while (!timer_cv_.wait_for(lk, every, [this] { return timer_stop_; })) {
      lk.unlock();
      write_all("timer");
      lk.lock();
    }
  });
}

void Checkpointer::stop_timer() {
  {
    std::lock_guard<std::mutex> lk(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

}  // namespace tensord
