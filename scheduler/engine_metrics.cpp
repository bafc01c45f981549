#include "scheduler/engine_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "metrics/metrics.h"
#include "scheduler/scheduler_types.h"

namespace tensord {

namespace {
prometheus::Histogram::BucketBoundaries time_buckets() {
  return {OpMetrics::kBounds.begin(), OpMetrics::kBounds.end()};
}

}  // namespace

struct EngineMetrics::Impl {
  std::string backend;
  prometheus::Family<prometheus::Counter>* jobs;
  prometheus::Family<prometheus::Histogram>* queue_s;
  prometheus::Family<prometheus::Histogram>* run_s;
  prometheus::Family<prometheus::Counter>* busy;
  prometheus::Family<prometheus::Gauge>* depth;
  prometheus::Family<prometheus::Gauge>* inflight;
  prometheus::Family<prometheus::Gauge>* limit;
  prometheus::Family<prometheus::Gauge>* mem;
  prometheus::Family<prometheus::Gauge>* mem_limit;
  prometheus::Family<prometheus::Gauge>* dev_mem;
  prometheus::Family<prometheus::Counter>* replays;
  prometheus::Family<prometheus::Counter>* captures;
  prometheus::Family<prometheus::Gauge>* graphs;

  // Series handles cached by label values (a job's end looks them up once
  // under `mu`, without hashing label sets in prometheus-cpp).
  struct JobSeries {
    prometheus::Histogram* queue_s = nullptr;
    prometheus::Histogram* run_s = nullptr;
    prometheus::Counter* busy = nullptr;
    std::vector<std::pair<std::string, prometheus::Counter*>> by_state;  // a handful: linear search
  };
  using GaugePair = std::pair<prometheus::Gauge*, prometheus::Gauge*>;
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, JobSeries> job_series;                // (tenant, partition)
  JobSeries& series_locked(const std::string& tenant, const std::string& partition);  // under mu
  std::map<std::string, GaugePair> tenant_mem;                                        // used, limit
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> replay_series;  // (tenant, state)
  std::map<std::string, GaugePair> device_mem;                                        // used, total

  // Scheduler state mirrored from its events, with the gauge it drives.
  struct Level {
    int64_t n = 0;
    prometheus::Gauge* gauge = nullptr;
  };
  std::mutex ev_mu;
  std::set<uint64_t> started;
  std::map<std::pair<std::string, std::string>, Level> q_depth;  // (tenant, partition)
  std::map<std::string, Level> q_running;                        // partition
};

EngineMetrics::EngineMetrics(std::string backend, bool enabled) : enabled_(enabled), impl_(std::make_unique<Impl>()) {
  impl_->backend = std::move(backend);
  if (!enabled_) return;  // nothing registered: /metrics shows build_info and process_* only
  auto& reg = metrics_registry();
  impl_->jobs =
      &prometheus::BuildCounter().Name("tensord_jobs_total").Help("Jobs finished, by final state").Register(reg);
  impl_->queue_s = &prometheus::BuildHistogram()
                        .Name("tensord_job_queue_seconds")
                        .Help("Time jobs waited in the queue")
                        .Register(reg);
  impl_->run_s =
      &prometheus::BuildHistogram().Name("tensord_job_run_seconds").Help("Time jobs ran on a partition").Register(reg);
  impl_->busy = &prometheus::BuildCounter()
                     .Name("tensord_tenant_busy_seconds_total")
                     .Help("Device time used per tenant and partition")
                     .Register(reg);
  OpMetrics::global();  // tensord_op_launches_total, tensord_op_seconds
  impl_->depth =
      &prometheus::BuildGauge().Name("tensord_queue_depth").Help("Jobs waiting per tenant and partition").Register(reg);
  impl_->inflight =
      &prometheus::BuildGauge().Name("tensord_partition_inflight").Help("Jobs running on a partition").Register(reg);
  impl_->limit = &prometheus::BuildGauge()
                      .Name("tensord_partition_workqueue_limit")
                      .Help("Most jobs a partition runs at once")
                      .Register(reg);
  impl_->mem =
      &prometheus::BuildGauge().Name("tensord_tenant_memory_bytes").Help("Bytes held by a tenant").Register(reg);
  impl_->replays = &prometheus::BuildCounter()
                        .Name("tensord_graph_replays_total")
                        .Help("Captured-graph replays, by tenant and final state")
                        .Register(reg);
  impl_->captures =
      &prometheus::BuildCounter().Name("tensord_graph_captures_total").Help("Graphs captured, by tenant").Register(reg);
  impl_->graphs =
      &prometheus::BuildGauge().Name("tensord_graphs").Help("Captured graphs alive, by tenant").Register(reg);
  impl_->dev_mem = &prometheus::BuildGauge()
                        .Name("tensord_device_memory_bytes")
                        .Help("Device memory: bytes in use by tensors (used) and the device's size (total)")
                        .Register(reg);
  impl_->mem_limit =
      &prometheus::BuildGauge().Name("tensord_tenant_memory_limit_bytes").Help("A tenant's memory quota").Register(reg);
}

EngineMetrics::~EngineMetrics() = default;

EngineMetrics::Impl::JobSeries& EngineMetrics::Impl::series_locked(const std::string& tenant,
                                                                   const std::string& partition) {
  auto it = job_series.find(std::make_pair(tenant, partition));
  if (it == job_series.end()) {
    const prometheus::Labels labels{{"tenant", tenant}, {"partition", partition}};
    JobSeries fresh;
    fresh.queue_s = &queue_s->Add(labels, time_buckets());
    fresh.run_s = &run_s->Add(labels, time_buckets());
    fresh.busy = &busy->Add(labels);
    it = job_series.emplace(std::make_pair(tenant, partition), std::move(fresh)).first;
  }
  return it->second;
}

void EngineMetrics::tenant_busy(const std::string& tenant, const std::string& partition, double seconds) {
  if (!enabled_ || seconds <= 0) return;
  prometheus::Counter* busy = nullptr;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    busy = impl_->series_locked(tenant, partition).busy;
  }
  busy->Increment(seconds);
}

void EngineMetrics::job_finished(const std::string& tenant, const std::string& partition, const std::string& state,
                                 double queue_s, double run_s) {
  if (!enabled_) return;
  prometheus::Counter* jobs = nullptr;
  Impl::JobSeries s;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->job_series.find(std::make_pair(tenant, partition));
    if (it == impl_->job_series.end()) {
      impl_->series_locked(tenant, partition);
      it = impl_->job_series.find(std::make_pair(tenant, partition));
    }
    for (const auto& [st, c] : it->second.by_state) {
      if (st == state) jobs = c;
    }
    if (jobs == nullptr) {
      jobs = &impl_->jobs->Add({{"tenant", tenant}, {"partition", partition}, {"state", state}});
      it->second.by_state.emplace_back(state, jobs);
    }
    s.queue_s = it->second.queue_s;
    s.run_s = it->second.run_s;
    s.busy = it->second.busy;
  }
  jobs->Increment();
  s.queue_s->Observe(queue_s);
  s.run_s->Observe(run_s);  // busy seconds come from tenant_busy, while the job runs
}

void EngineMetrics::ops_ran(OpMetrics::Batch& ops) {
  if (enabled_) {
    OpMetrics::global().commit(impl_->backend, ops);
  } else {
    ops = OpMetrics::Batch();
  }
}

void EngineMetrics::queue_depth(const std::string& tenant, const std::string& partition, int64_t depth) {
  if (!enabled_) return;
  impl_->depth->Add({{"tenant", tenant}, {"partition", partition}}).Set(static_cast<double>(depth));
}

void EngineMetrics::device_memory(const std::string& device, int64_t used, int64_t total) {
  if (!enabled_) return;
  Impl::GaugePair g;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->device_mem.find(device);
    if (it == impl_->device_mem.end()) {
      Impl::GaugePair fresh{&impl_->dev_mem->Add({{"device", device}, {"kind", "used"}}),
                            &impl_->dev_mem->Add({{"device", device}, {"kind", "total"}})};
      it = impl_->device_mem.emplace(device, fresh).first;
    }
    g = it->second;
  }
  g.first->Set(static_cast<double>(used));
  g.second->Set(static_cast<double>(total));
}

void EngineMetrics::graph_replayed(const std::string& tenant, const std::string& state) {
  if (!enabled_) return;
  prometheus::Counter* c = nullptr;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto [it, added] = impl_->replay_series.try_emplace(std::make_pair(tenant, state), nullptr);
    if (added) it->second = &impl_->replays->Add({{"tenant", tenant}, {"state", state}});
    c = it->second;
  }
  c->Increment();  // series are never removed: the handle stays valid
}

void EngineMetrics::tenant_registered(const std::string& tenant) {
  if (!enabled_) return;
  // Series exist from the start (at 0), so rate() and dashboards work before
  // the first event.
  impl_->replays->Add({{"tenant", tenant}, {"state", "succeeded"}});
  impl_->captures->Add({{"tenant", tenant}});
  impl_->graphs->Add({{"tenant", tenant}});
}

void EngineMetrics::graph_captured(const std::string& tenant, int live_delta) {
  if (!enabled_) return;
  if (live_delta > 0) impl_->captures->Add({{"tenant", tenant}}).Increment();
  impl_->graphs->Add({{"tenant", tenant}}).Increment(live_delta);
}

void EngineMetrics::on_event(const JobEvent& e) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lk(impl_->ev_mu);
  auto& d = impl_->q_depth[{e.tenant, e.partition}];
  auto& r = impl_->q_running[e.partition];
  if (d.gauge == nullptr) d.gauge = &impl_->depth->Add({{"tenant", e.tenant}, {"partition", e.partition}});
  if (r.gauge == nullptr) r.gauge = &impl_->inflight->Add({{"partition", e.partition}});
  switch (e.kind) {
    case JobEvent::Kind::kQueued:
      ++d.n;
      break;
    case JobEvent::Kind::kStarted:
      --d.n;
      ++r.n;
      impl_->started.insert(e.id);
      break;
    case JobEvent::Kind::kFinished:
    case JobEvent::Kind::kFailed:
      if (impl_->started.erase(e.id)) {
        --r.n;
      } else {
        --d.n;  // left the queue without running (cancelled, expired, shutdown)
      }
      break;
  }
  d.gauge->Set(static_cast<double>(d.n));
  r.gauge->Set(static_cast<double>(r.n));
}

void EngineMetrics::inflight(const std::string& partition, int64_t n, int64_t limit) {
  if (!enabled_) return;
  impl_->inflight->Add({{"partition", partition}}).Set(static_cast<double>(n));
  impl_->limit->Add({{"partition", partition}}).Set(static_cast<double>(limit));
}

void EngineMetrics::tenant_memory(const std::string& tenant, int64_t used, int64_t limit) {
  if (!enabled_) return;
  Impl::GaugePair g;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->tenant_mem.find(tenant);
    if (it == impl_->tenant_mem.end()) {
      Impl::GaugePair fresh{&impl_->mem->Add({{"tenant", tenant}}), &impl_->mem_limit->Add({{"tenant", tenant}})};
      it = impl_->tenant_mem.emplace(tenant, fresh).first;
    }
    g = it->second;
  }
  g.first->Set(static_cast<double>(used));
  g.second->Set(static_cast<double>(limit));
}

}  // namespace tensord
