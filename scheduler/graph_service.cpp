#include "scheduler/graph_service.h"

#include <utility>

#include "graphs/compiled_program.h"
#include "graphs/device_graph.h"
#include "graphs/exec_options.h"
#include "ops/dist/process_group.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/job.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd_plan.h"
#include "scheduler/tenant.h"

namespace tensord {

std::shared_ptr<Job> GraphService::capture_async(Tenant& tenant, GraphCaptureRequest cr, const std::string& request_id,
                                                 CaptureDone done) {
  if (!cr.name.empty()) store_.check_name_free(tenant.name, cr.name);  // 409 before anything is queued
  auto req = std::make_shared<const GraphCaptureRequest>(std::move(cr));
  auto graph = std::make_shared<std::shared_ptr<CapturedGraph>>();  // the task's result, read once the job ended
  Tenant* t = &tenant;
  auto task = [this, t, req, graph](const ExecOptions& eo) {
    *graph = req->spmd ? capture_spmd(*t, *req, eo) : capture(*t, *req, eo.ctx.device);
    engine_.record_tenant_memory(*t);
    engine_.record_graph_capture(*t, +1);
  };
  return engine_.run_task_async(tenant, request_id, std::move(task), [graph, done = std::move(done)](Job& j) {
    done(j, j.state() == JobState::kSucceeded ? *graph : nullptr);
  });
}

std::shared_ptr<CapturedGraph> GraphService::capture(Tenant& tenant, const GraphCaptureRequest& cr, Device device) {
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  // Validation, binding, shape inference and the memory plan: once, inside
  // the capture (GET /v1/graphs/{id} shows is_capturing meanwhile).
  auto compile = [&cr, &stored_lookup] {
    CompiledProgram cp = compile_program(cr.program, cr.inputs, stored_lookup);
    cp.program_sha256 = cr.program_sha256;
    return cp;
  };
  return store_.capture(tenant.name, tenant.account, &engine_.backend(), device, compile, cr.pool, cr.name);
}

// A capture with "ranks" (API.md 8): the group's members compiled over
// their input shapes as an SPMD job's are (every rank's program, the
// extents of uneven all_gathers, 422 where ranks disagree at a collective).
std::shared_ptr<CapturedGraph> GraphService::capture_spmd(Tenant& tenant, const GraphCaptureRequest& cr,
                                                          const ExecOptions& opts) {
  const Device device = opts.ctx.device;
  RankWorkers& workers = engine_.ranks();
  SpmdPlan p;
  p.ranks = spmd_group(*cr.spmd, workers.world());
  for (int r : p.ranks) {
    if (!workers.is_local(r)) {
      throw Error(ErrorCode::kBadRequest, "graphs with ranks on other servers are not supported yet: rank " +
                                              std::to_string(r) + " is not one of this server's (ranks " +
                                              std::to_string(workers.offset()) + ".." +
                                              std::to_string(workers.offset() + workers.size() - 1) + ")");
    }
  }
  p.group = spmd_group_name(p.ranks, workers.world());
  auto stored_lookup = [&tenant](const std::string& n) { return tenant.store.get(n); };
  auto compile = [&] {
    compile_spmd_declared(p, cr.program, cr.inputs, cr.per_rank, stored_lookup);
    for (auto& member : p.programs) {
      auto named = std::make_shared<CompiledProgram>(*member);
      named->program_sha256 = cr.program_sha256;
      member = std::move(named);
    }
    return p.programs;
  };
  auto scope = [&p](const std::function<void()>& bind) { in_spmd_infer_scope(p, bind); };
  auto finish = [&](SpmdGraph& sg) { capture_on_ranks(tenant, sg, opts); };
  return store_.capture_spmd(tenant.name, tenant.account, &engine_.backend(), device, compile, scope, p.ranks, p.group,
                             cr.name, finish);
}

// On a device backend (CUDA: rank r on GPU r), every member's program
// captured whole into a device graph on its rank's GPU and stream, its
// collectives enqueued on the capturing stream (API.md 8: "on CUDA, NCCL
// kernels are captured into the graph"). All ranks capture at once, each
// on its rank's thread: before the stream capture each checks its
// collectives' calls with the others (shapes are static from then on). It
// is all members or none: where one member's program cannot be captured
// (a collective inside a cond or while_loop body, a barrier, scan, a CPU
// fallback, an optimizer) or the ranks' groups cannot capture collectives
// (Gloo), every member replays through the executor. A rank whose capture
// fails fails the capture, on every rank, by name.
void GraphService::capture_on_ranks(Tenant& tenant, SpmdGraph& sg, const ExecOptions& opts) {
  if (!engine_.ranks_on_devices()) return;
  Backend& backend = engine_.backend();
  for (const GraphMember& m : sg.members) {
    if (!DeviceGraph::capturable(*m.program, backend.name(), true)) return;
  }
  std::vector<std::shared_ptr<DeviceGraph>> graphs(sg.members.size());
  auto part = [&](size_t i, const ExecOptions& eo) {
    if (!eo.ctx.group || !eo.ctx.group->supports_capture()) return;  // the same on every rank
    auto dg = std::make_shared<DeviceGraph>(sg.members[i].program, &backend, eo.ctx.device, tenant.account);
    try {
      dg->capture(eo);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kCancelled) throw;  // another rank failed: its error tells
      throw Error(e.code(),
                  "rank " + std::to_string(sg.ranks[i]) + ": capturing its device graph failed: " + e.message(),
                  e.node());
    }
    graphs[i] = std::move(dg);
  };
  engine_.run_on_ranks(sg.ranks, sg.group, opts, part);
  for (size_t i = 0; i < graphs.size(); ++i) {
    if (!graphs[i]) return;  // not captured on every rank: none replays captured
  }
  for (size_t i = 0; i < graphs.size(); ++i) {
    sg.members[i].plan->launch_on(graphs[i]);
    sg.members[i].device_graph = std::move(graphs[i]);
  }
}

std::shared_ptr<Job> GraphService::replay_async(Tenant& tenant, const std::shared_ptr<CapturedGraph>& g, JobSpec spec,
                                                std::function<void(Job&)> done) {
  spec.graph_id = g->id;                             // /v1/trace: the replay's op and run spans name their graph
  spec.program_sha256 = g->program->program_sha256;  // the job info's, as a run's
  for (const auto& [out, stored_name] : spec.store) {
    for (const auto& [name, id] : g->program->outputs) {
      if (name == out && g->program->values[static_cast<size_t>(id)].source == ValueInfo::Source::kInput) {
        throw Error(ErrorCode::kBadRequest, "store: output '" + out + "' is a graph input; store the input itself");
      }
    }
  }
  auto on_end = [g, done = std::move(done)](Job& j) {
    // Counted before the answer goes out: a client that
    // reads the graph right after its reply sees this replay.
    if (j.state() == JobState::kSucceeded) g->replays.fetch_add(1);
    done(j);
  };
  if (g->spmd) return engine_.replay_spmd_async(tenant, g->spmd, std::move(spec), std::move(on_end));
  if (spec.spmd) {
    throw Error(ErrorCode::kBadRequest, "graph '" + g->id +
                                            "' was captured without \"ranks\": a replay of it takes no \"ranks\", "
                                            "per_rank or shard inputs (API.md 8)");
  }
  g->plan->check_inputs(spec.inputs);  // 409 before anything is queued
  return engine_.replay_async(tenant, g->plan, g->pool, std::move(spec), std::move(on_end));
}

std::shared_ptr<CapturedGraph> GraphService::find(const Tenant& tenant, const std::string& id) const {
  if (auto g = store_.find(tenant.name, id)) return g;
  if (store_.capturing(tenant.name, id)) throw Error(ErrorCode::kConflict, "graph '" + id + "' is still capturing");
  throw Error(ErrorCode::kNotFound, "graph '" + id + "' not found");
}

std::shared_ptr<CapturedGraph> GraphService::find_model(const Tenant& tenant, const std::string& model) const {
  return store_.find_by_name_or_id(tenant.name, model);
}

std::vector<std::shared_ptr<CapturedGraph>> GraphService::list(const Tenant& tenant) const {
  return store_.list(tenant.name);
}

GraphInfo GraphService::info(const Tenant& tenant, const std::string& id) const {
  auto info = store_.info(tenant.name, id);
  if (!info) throw Error(ErrorCode::kNotFound, "graph '" + id + "' not found");
  return *info;
}

void GraphService::erase(Tenant& tenant, const std::string& id) {
  if (store_.capturing(tenant.name, id)) throw Error(ErrorCode::kConflict, "graph '" + id + "' is still capturing");
  if (!store_.erase(tenant.name, id)) throw Error(ErrorCode::kNotFound, "graph '" + id + "' not found");
  engine_.record_tenant_memory(tenant);
  engine_.record_graph_capture(tenant, -1);
}

}  // namespace tensord
