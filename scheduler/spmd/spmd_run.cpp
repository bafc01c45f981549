#include "scheduler/spmd/spmd_run.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "ops/backend.h"
#include "ops/dist/flight_recorder.h"
#include "ops/error.h"
#include "scheduler/rank_workers.h"
#include "scheduler/spmd_peers.h"
#include "scheduler/spmd_plan.h"

namespace tensord {

namespace {

// What the threads forwarding parts to peers share with the job; owned
// jointly, since a job that failed does not wait for a stalled peer.
struct Forwards {
  std::mutex mu;
  std::vector<std::exception_ptr> errors;
  std::vector<std::pair<std::vector<size_t>, std::vector<std::pair<std::string, std::vector<Tensor>>>>> answers;
  std::vector<bool> answered;  // per part: its peer's answer (or error) came
  size_t left = 0;
};

// The peer's outputs as an ExecResult per member, in the program's output
// order (an output the peer did not return stays undefined).
void take_answer(const SpmdPlan& plan, const std::vector<size_t>& members,
                 const std::vector<std::pair<std::string, std::vector<Tensor>>>& outs,
                 std::vector<ExecResult>& results) {
  for (size_t j = 0; j < members.size(); ++j) {
    ExecResult& r = results[members[j]];
    for (const auto& [name, id] : plan.programs[0]->outputs) {
      Tensor t;
      for (const auto& [o, ts] : outs) {
        if (o == name && !ts.empty()) t = ts.size() == 1 ? ts[0] : ts.at(j);
      }
      r.outputs.emplace_back(name, t);
    }
  }
}

}  // namespace

std::vector<ExecResult> run_spmd(const SpmdRun& run, RankWorkers& workers, const ExecOptions& base,
                                 const std::atomic<bool>& cancelled, std::vector<bool>& ran) {
  const SpmdPlan& plan = *run.plan;
  const size_t n = plan.ranks.size();
  std::vector<ExecResult> results(n);
  ran.assign(n, false);
  // The members on other servers, by server (none for a forwarded part).
  std::map<std::string, std::vector<size_t>> remote;
  for (size_t i = 0; i < n; ++i) {
    if (workers.is_local(plan.ranks[i])) {
      const bool mine = run.part.empty() || std::find(run.part.begin(), run.part.end(), i) != run.part.end();
      if (!mine)
        throw Error(ErrorCode::kBadRequest, "spmd_part leaves out local rank " + std::to_string(plan.ranks[i]));
      continue;
    }
    if (!run.part.empty()) {
      if (std::find(run.part.begin(), run.part.end(), i) != run.part.end()) {
        throw Error(ErrorCode::kBadRequest,
                    "spmd_part names rank " + std::to_string(plan.ranks[i]) + ", which is not one of this server's");
      }
      continue;
    }
    if (!run.peers) {
      throw Error(ErrorCode::kUnavailable, "rank " + std::to_string(plan.ranks[i]) + " is on another server and " +
                                               "this server has no --rendezvous to reach it");
    }
    // One coordinator per world, or two servers could each hold their ranks
    // for a job that waits on the other's (API.md 8).
    if (workers.offset() != 0) {
      throw Error(ErrorCode::kBadRequest, "rank " + std::to_string(plan.ranks[i]) +
                                              " is on another server: send requests over the world's ranks to "
                                              "the server whose --rank-offset is 0");
    }
    remote[run.peers->server_of(plan.ranks[i])].push_back(i);
  }

  // Every member stops when any fails, the job is cancelled or its deadline
  // passes: at its next node, or while it waits in a collective.
  auto abort = std::make_shared<std::atomic<bool>>(false);
  auto fw = std::make_shared<Forwards>();
  fw->errors.resize(remote.size());
  fw->answered.assign(remote.size(), false);
  fw->left = remote.size();
  size_t k = 0;
  for (auto& [server, members] : remote) {
    // On a thread of its own (PeerCallPool): a peer that stalls must not
    // hold the job past its failure; the call ends when the peer answers or
    // its deadline passes, and only the shared state waits for it.
    workers.peer_calls().post([fw, abort, k, server = server, members = members, peers = run.peers, spec = *run.spec,
                               group = plan.ranks, key = run.key, deadline = base.deadline] {
      try {
        auto outs = peers->run_part(server, spec, group, members, key, deadline);
        std::lock_guard lk(fw->mu);
        fw->answers.emplace_back(members, std::move(outs));
      } catch (...) {
        abort->store(true);
        std::lock_guard lk(fw->mu);
        fw->errors[k] = std::current_exception();
      }
      std::lock_guard lk(fw->mu);
      fw->answered[k] = true;
      --fw->left;
    });
    ++k;
  }

  bool first_local = true;
  std::vector<size_t> reporter;  // the member whose nodes are counted (metrics, traces)
  for (size_t i = 0; i < n && first_local; ++i) {
    if (workers.is_local(plan.ranks[i])) {
      reporter.push_back(i);
      first_local = false;
    }
  }
  auto part = [&](size_t i, dist::ProcessGroup& group) {
    ExecOptions eo = base;
    eo.ctx.group = &group;
    // The ranks share the partition's cores: each runs its kernels inline
    // on its own thread (a pool is fed by one runner at a time).
    eo.ctx.pool = nullptr;
    eo.ctx.cancelled = abort.get();
    if (reporter.empty() || i != reporter[0]) eo.on_node = nullptr;  // the group's work counted once
    std::optional<ThreadStreamBinding> bound;
    if (!run.places.empty()) {
      // The rank's own device and stream: its inputs and stored reads are
      // copied there (graphs/device_placement.h); the binding orders the
      // thread's memory work on the stream and waits for it at the end.
      const RankPlace& p = run.places.at(static_cast<size_t>(plan.ranks[i] - workers.offset()));
      eo.ctx.device = p.device;
      eo.ctx.stream = p.stream;
      bound.emplace(eo.ctx.backend, p.stream);
    }
    try {
      results[i] = run.run_member ? run.run_member(i, eo) : execute_program(*plan.programs[i], plan.inputs[i], eo);
    } catch (...) {
      abort->store(true);
      throw;
    }
  };
  auto tick = [&] {
    if (cancelled.load() || std::chrono::steady_clock::now() >= base.deadline) abort->store(true);
  };
  std::vector<std::exception_ptr> errors = workers.run(plan.ranks, run.key, part, tick, abort.get());
  for (size_t i = 0; i < n; ++i) {
    ran[i] = workers.is_local(plan.ranks[i]) && !errors[i];
    if (errors[i]) abort->store(true);
  }

  // The peers' answers. A job whose part failed here waits a moment only:
  // a peer that died shows on both paths at once (its collectives break
  // here, its HTTP answer never comes), and the latter names its ranks.
  const auto failed_at = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard lk(fw->mu);
      if (fw->left == 0) break;
    }
    if (abort->load() && std::chrono::steady_clock::now() - failed_at > std::chrono::milliseconds(500)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    tick();
  }
  // The peers still silent: what a cut link or a stalled server looks like
  // from here (their ranks' collectives time out on this server's side,
  // where Gloo cannot say whom it waited on).
  std::string silent;
  {
    std::lock_guard lk(fw->mu);
    size_t part = 0;
    for (const auto& [server, members] : remote) {
      if (!fw->answered[part++]) {
        std::string ranks;
        for (size_t m : members) ranks += (ranks.empty() ? "" : ", ") + std::to_string(plan.ranks[m]);
        silent += (silent.empty() ? "" : "; ") + ("ranks [" + ranks + "] (server " + server + ") have not answered");
      }
    }
    for (const auto& e : fw->errors) {
      if (e) errors.push_back(e);
    }
    if (fw->left == 0) {
      for (const auto& [members, outs] : fw->answers) {
        take_answer(plan, members, outs, results);
        for (size_t m : members) ran[m] = true;
      }
    } else if (!abort->load()) {
      errors.push_back(std::make_exception_ptr(Error(ErrorCode::kInternal, "a peer's part did not end")));
    }
  }

  std::exception_ptr first;
  std::optional<Error> first_cancel;
  // A peer that did not answer explains the rest: reported first.
  std::stable_partition(errors.begin() + static_cast<std::ptrdiff_t>(n), errors.end(), [](const std::exception_ptr& e) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const Error& err) {
      return err.code() == ErrorCode::kDeadlineExceeded;
    } catch (...) {
    }
    return false;
  });
  if (errors.size() > n && errors[n])
    std::rotate(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(n),
                errors.begin() + static_cast<std::ptrdiff_t>(n) + 1);
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kCancelled) {
        if (!first_cancel) first_cancel = err;
        continue;
      }
      if (!first) first = e;
    } catch (...) {
      if (!first) first = e;
    }
  }
  if (!first && !first_cancel) return results;
  if (first) {
    try {
      std::rethrow_exception(first);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kDeadlineExceeded || remote.empty()) throw;
      // A peer that died or stalled: say how far this server's ranks got.
      int64_t seq = -1;
      for (int r = 0; r < workers.size(); ++r) {
        for (const auto& g : workers.recorder(r)->dump().groups) {
          if (g.name == plan.group) seq = std::max(seq, g.last_enqueued_collective);
        }
      }
      throw Error(e.code(),
                  e.message() + "; group " + plan.group + ", last seq " + std::to_string(seq) +
                      " on this server's ranks" + (silent.empty() ? "" : "; " + silent),
                  e.node());
    }
  }
  if (!cancelled.load() && std::chrono::steady_clock::now() >= base.deadline) {
    throw Error(ErrorCode::kDeadlineExceeded,
                "the job's deadline passed while its ranks ran (group " + plan.group + "): " + first_cancel->message());
  }
  throw *first_cancel;
}

}  // namespace tensord
