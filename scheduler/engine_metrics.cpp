#include "scheduler/engine_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <set>

#include "metrics/metrics.h"
#include "scheduler/scheduler_types.h"

namespace tensord {

namespace {
prometheus::Histogram::BucketBoundaries time_buckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,      0.25,    0.5,    1,       2.5,    5,     10,     30,    60,   300};
}
}  // namespace

struct EngineMetrics::Impl {
  std::string backend;
  prometheus::Family<prometheus::Counter>* jobs;
  prometheus::Family<prometheus::Histogram>* queue_s;
  prometheus::Family<prometheus::Histogram>* run_s;
  prometheus::Family<prometheus::Counter>* busy;
  prometheus::Family<prometheus::Counter>* launches;
  prometheus::Family<prometheus::Histogram>* op_s;
  prometheus::Family<prometheus::Gauge>* depth;
  prometheus::Family<prometheus::Gauge>* inflight;
  prometheus::Family<prometheus::Gauge>* limit;
  prometheus::Family<prometheus::Gauge>* mem;
  prometheus::Family<prometheus::Gauge>* mem_limit;
  prometheus::Family<prometheus::Gauge>* dev_mem;
  prometheus::Family<prometheus::Counter>* replays;
  prometheus::Family<prometheus::Counter>* captures;
  prometheus::Family<prometheus::Gauge>* graphs;
  std::mutex mu;
  std::map<std::string, std::pair<prometheus::Counter*, prometheus::Histogram*>> ops;
  // Scheduler state mirrored from its events.
  std::mutex ev_mu;
  std::set<uint64_t> started;
  std::map<std::pair<std::string, std::string>, int64_t> q_depth;  // (tenant, partition)
  std::map<std::string, int64_t> q_running;                        // partition
};

EngineMetrics::EngineMetrics(std::string backend) : impl_(std::make_unique<Impl>()) {
  auto& reg = metrics_registry();
  impl_->backend = std::move(backend);
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
  impl_->launches =
      &prometheus::BuildCounter().Name("tensord_op_launches_total").Help("Op kernel launches").Register(reg);
  impl_->op_s = &prometheus::BuildHistogram().Name("tensord_op_seconds").Help("Op kernel time").Register(reg);
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
  impl_->graphs = &prometheus::BuildGauge().Name("tensord_graphs").Help("Captured graphs alive, by tenant").Register(reg);
  impl_->dev_mem = &prometheus::BuildGauge()
                         .Name("tensord_device_memory_bytes")
                         .Help("Device memory: bytes in use by tensors (used) and the device's size (total)")
                         .Register(reg);
  impl_->mem_limit =
      &prometheus::BuildGauge().Name("tensord_tenant_memory_limit_bytes").Help("A tenant's memory quota").Register(reg);
}

EngineMetrics::~EngineMetrics() = default;

void EngineMetrics::job_finished(const std::string& tenant, const std::string& partition, const std::string& state,
                                 double queue_s, double run_s) {
  impl_->jobs->Add({{"tenant", tenant}, {"partition", partition}, {"state", state}}).Increment();
  impl_->queue_s->Add({{"tenant", tenant}, {"partition", partition}}, time_buckets()).Observe(queue_s);
  impl_->run_s->Add({{"tenant", tenant}, {"partition", partition}}, time_buckets()).Observe(run_s);
  impl_->busy->Add({{"tenant", tenant}, {"partition", partition}}).Increment(run_s);
}

void EngineMetrics::op_ran(const std::string& op, double seconds) {
  std::pair<prometheus::Counter*, prometheus::Histogram*> c;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->ops.find(op);
    if (it == impl_->ops.end()) {
      c = {&impl_->launches->Add({{"op", op}, {"backend", impl_->backend}}),
           &impl_->op_s->Add({{"op", op}}, time_buckets())};
      impl_->ops.emplace(op, c);
    } else {
      c = it->second;
    }
  }
  c.first->Increment();
  c.second->Observe(seconds);
}

void EngineMetrics::queue_depth(const std::string& tenant, const std::string& partition, int64_t depth) {
  impl_->depth->Add({{"tenant", tenant}, {"partition", partition}}).Set(static_cast<double>(depth));
}

void EngineMetrics::device_memory(const std::string& device, int64_t used, int64_t total) {
  impl_->dev_mem->Add({{"device", device}, {"kind", "used"}}).Set(static_cast<double>(used));
  impl_->dev_mem->Add({{"device", device}, {"kind", "total"}}).Set(static_cast<double>(total));
}

void EngineMetrics::graph_replayed(const std::string& tenant, const std::string& state) {
  impl_->replays->Add({{"tenant", tenant}, {"state", state}}).Increment();
}

void EngineMetrics::tenant_registered(const std::string& tenant) {
  // Series exist from the start (at 0), so rate() and dashboards work before
  // the first event.
  impl_->replays->Add({{"tenant", tenant}, {"state", "succeeded"}});
  impl_->captures->Add({{"tenant", tenant}});
  impl_->graphs->Add({{"tenant", tenant}});
}

void EngineMetrics::graph_captured(const std::string& tenant, int live_delta) {
  if (live_delta > 0) impl_->captures->Add({{"tenant", tenant}}).Increment();
  impl_->graphs->Add({{"tenant", tenant}}).Increment(live_delta);
}

void EngineMetrics::on_event(const JobEvent& e) {
  std::lock_guard<std::mutex> lk(impl_->ev_mu);
  auto& d = impl_->q_depth[{e.tenant, e.partition}];
  auto& r = impl_->q_running[e.partition];
  switch (e.kind) {
    case JobEvent::Kind::kQueued:
      ++d;
      break;
    case JobEvent::Kind::kStarted:
      --d;
      ++r;
      impl_->started.insert(e.id);
      break;
    case JobEvent::Kind::kFinished:
    case JobEvent::Kind::kFailed:
      if (impl_->started.erase(e.id)) {
        --r;
      } else {
        --d;  // left the queue without running (cancelled, expired, shutdown)
      }
      break;
  }
  impl_->depth->Add({{"tenant", e.tenant}, {"partition", e.partition}}).Set(static_cast<double>(d));
  impl_->inflight->Add({{"partition", e.partition}}).Set(static_cast<double>(r));
}

void EngineMetrics::inflight(const std::string& partition, int64_t n, int64_t limit) {
  impl_->inflight->Add({{"partition", partition}}).Set(static_cast<double>(n));
  impl_->limit->Add({{"partition", partition}}).Set(static_cast<double>(limit));
}

void EngineMetrics::tenant_memory(const std::string& tenant, int64_t used, int64_t limit) {
  impl_->mem->Add({{"tenant", tenant}}).Set(static_cast<double>(used));
  impl_->mem_limit->Add({{"tenant", tenant}}).Set(static_cast<double>(limit));
}

}  // namespace tensord
