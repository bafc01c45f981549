#include "scheduler/rank_workers.h"

#include <atomic>
#include <utility>

#include "ops/dist/abortable_store.h"
#include "ops/dist/dist_ops.h"
#include "ops/dist/flight_recorder.h"
#include "ops/dist/gloo_process_group.h"
#include "ops/error.h"

namespace tensord {

// A local rank: its thread, running the parts posted to it in order.
struct RankWorkers::Rank {
  std::shared_ptr<dist::FlightRecorder> recorder;
  std::shared_ptr<gloo::transport::Device> device;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool stop = false;
  std::thread thread;

  void loop() {
    for (;;) {
      std::function<void()> t;
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [this] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;
        t = std::move(tasks.front());
        tasks.pop_front();
      }
      t();
    }
  }
  void post(std::function<void()> t) {
    {
      std::lock_guard lk(mu);
      tasks.push_back(std::move(t));
    }
    cv.notify_one();
  }
};

// One group over some ranks: member i's ProcessGroup lives in members[i].
struct RankWorkers::Group {
  std::string key_prefix;  // unique per generation: a replaced group never meets its successor
  int64_t pg_id = 0;
  // Set by abort(): members still joining give up (their store waits).
  std::shared_ptr<std::atomic<bool>> joining_aborted = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu;        // members (filled on the rank threads, aborted from the caller's) and aborted
  std::string aborted;  // why; empty while usable
  std::vector<std::unique_ptr<dist::ProcessGroup>> members;

  // Every member gives up at once: its pending collectives fail, its peers
  // (here and on other servers) stop waiting on it, members still joining
  // stop. The group is retired after.
  void abort(const std::string& why) {
    std::lock_guard lk(mu);
    if (!aborted.empty()) return;
    aborted = why;
    joining_aborted->store(true);
    for (auto& m : members) {
      if (m) m->abort(why);
    }
  }
};

namespace {
RankWorkersOptions checked(RankWorkersOptions o) {
  if (o.world_size == 0) o.world_size = o.ranks;
  TENSORD_CHECK(o.ranks >= 1, kInvalidArgument, "--ranks must be at least 1");
  TENSORD_CHECK(o.rank_offset >= 0 && o.rank_offset + o.ranks <= o.world_size, kInvalidArgument,
                "ranks " + std::to_string(o.rank_offset) + ".." + std::to_string(o.rank_offset + o.ranks - 1) +
                    " do not fit a world of " + std::to_string(o.world_size));
  return o;
}
}  // namespace

RankWorkers::RankWorkers(RankWorkersOptions opts) : opts_(checked(std::move(opts))) {
  dist::link_dist_ops();
  if (!opts_.make_store) store_ = dist::make_hash_store();
  // One TCP device (one event loop thread) for all local ranks: on a
  // machine with few cores, a loop thread per rank costs more in wake-ups
  // than the ranks gain in parallel I/O.
  // A group factory's ranks need none.
  const bool gloo = !opts_.groups.make;
  auto device = gloo ? dist::make_tcp_device(opts_.hostname) : nullptr;
  for (int r = 0; r < opts_.ranks; ++r) {
    auto rk = std::make_unique<Rank>();
    rk->recorder = std::make_shared<dist::FlightRecorder>(opts_.rank_offset + r, opts_.flight_recorder_entries);
    rk->recorder->set_comm_lib_version(gloo ? dist::GlooProcessGroup::version() : opts_.groups.version);
    rk->device = device;
    Rank* raw = rk.get();
    rk->thread = std::thread([raw] { raw->loop(); });
    ranks_.push_back(std::move(rk));
  }
}

RankWorkers::~RankWorkers() {
  for (auto& r : ranks_) {
    {
      std::lock_guard lk(r->mu);
      r->stop = true;
    }
    r->cv.notify_one();
  }
  for (auto& r : ranks_) r->thread.join();
  std::map<std::string, std::shared_ptr<Group>> groups;
  std::vector<std::thread> reapers;
  {
    std::lock_guard lk(groups_mu_);
    groups.swap(groups_);
    reapers.swap(reapers_);
  }
  groups.clear();
  for (auto& t : reapers) t.join();
}

std::shared_ptr<dist::FlightRecorder> RankWorkers::recorder(int r) const {
  return ranks_.at(static_cast<size_t>(r))->recorder;
}

dist::ProcessGroup& RankWorkers::member_of(Group& g, const std::vector<int>& ranks, size_t index) {
  // Each member fills its own slot, on its own thread, and only while no
  // other run can touch the group (run_mu_); abort() reads the slots from
  // the caller's thread (g.mu).
  {
    std::lock_guard lk(g.mu);
    if (g.members[index]) return *g.members[index];
  }
  std::unique_ptr<dist::ProcessGroup> member;
  try {
    member = join(g, ranks, index);
  } catch (...) {
    std::lock_guard lk(g.mu);
    if (g.aborted.empty()) throw;
    throw Error(ErrorCode::kCancelled, "rank " + std::to_string(ranks[index]) + " stopped joining group " +
                                           dist::group_name(ranks, world()) + ": " + g.aborted);
  }
  std::lock_guard lk(g.mu);
  if (!g.aborted.empty()) member->abort(g.aborted);
  g.members[index] = std::move(member);
  return *g.members[index];
}

std::unique_ptr<dist::ProcessGroup> RankWorkers::join(Group& g, const std::vector<int>& ranks, size_t index) {
  const int local = ranks[index] - opts_.rank_offset;
  Rank& rk = *ranks_[static_cast<size_t>(local)];
  dist::ProcessGroupOptions po;
  po.name = dist::group_name(ranks, world());
  po.global_ranks = ranks;
  po.pg_id = g.pg_id;
  po.timeout = opts_.collective_timeout;
  po.recorder = rk.recorder;
  po.on_collective = opts_.on_collective;
  if (opts_.groups.make) {
    dist::GroupJoin join;
    join.local_rank = local;
    join.store = opts_.make_store ? opts_.make_store() : store_;
    join.key_prefix = g.key_prefix;
    join.rendezvous_timeout = opts_.collective_timeout;
    return opts_.groups.make(static_cast<int>(index), static_cast<int>(ranks.size()), std::move(po), join);
  }
  dist::GlooOptions go;
  // Its waits for the peers' addresses stop when the group is aborted (a
  // job that failed elsewhere while this member joined).
  go.store = std::make_shared<dist::AbortableStore>(opts_.make_store ? opts_.make_store() : store_, g.joining_aborted);
  go.key_prefix = g.key_prefix;
  go.device = rk.device;
  go.rendezvous_timeout = opts_.collective_timeout;
  return std::make_unique<dist::GlooProcessGroup>(static_cast<int>(index), static_cast<int>(ranks.size()),
                                                  std::move(po), std::move(go));
}

std::vector<std::exception_ptr> RankWorkers::run(const std::vector<int>& ranks, const std::string& key_prefix,
                                                 const Part& part, const std::function<void()>& tick,
                                                 const std::atomic<bool>* stop) {
  for (int r : ranks) {
    TENSORD_CHECK(r >= 0 && r < world(), kInvalidArgument,
                  "rank " + std::to_string(r) + " is not in the world of " + std::to_string(world()));
  }
  std::lock_guard run_lock(run_mu_);
  const std::string name = dist::group_name(ranks, world());
  std::shared_ptr<Group> g;
  {
    std::lock_guard lk(groups_mu_);
    auto& slot = groups_[name];
    if (slot && slot->key_prefix != key_prefix) {
      // Another generation of the group: the old one winds down apart.
      reapers_.emplace_back([old = std::move(slot)]() mutable { old.reset(); });
    }
    if (!slot) {
      slot = std::make_shared<Group>();
      slot->key_prefix = key_prefix;
      slot->pg_id = next_pg_id_++;
      slot->members.resize(ranks.size());
    }
    g = slot;
  }
  const size_t n = ranks.size();
  std::vector<std::exception_ptr> errors(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t left = 0;
  std::string failure;  // the first part's failure: why the group is aborted
  for (size_t i = 0; i < n; ++i) left += is_local(ranks[i]) ? 1 : 0;
  for (size_t i = 0; i < n; ++i) {
    if (!is_local(ranks[i])) continue;
    ranks_[static_cast<size_t>(ranks[i] - opts_.rank_offset)]->post([&, i] {
      std::string why;
      try {
        part(i, member_of(*g, ranks, i));
      } catch (const std::exception& e) {
        errors[i] = std::current_exception();
        why = "rank " + std::to_string(ranks[i]) + " failed: " + e.what();
      } catch (...) {
        errors[i] = std::current_exception();
        why = "rank " + std::to_string(ranks[i]) + " failed";
      }
      std::lock_guard lk(mu);
      if (failure.empty()) failure = why;
      if (--left == 0) cv.notify_all();
    });
  }
  // A part that failed, or the caller's stop, aborts the group at once:
  // the other members stop waiting in their collectives (here and on the
  // world's other servers), not at the collective timeout.
  bool aborted = false;
  std::unique_lock lk(mu);
  for (;;) {
    if (!aborted && (!failure.empty() || (stop && stop->load()))) {
      const std::string why = failure.empty() ? "the job was stopped" : failure;
      lk.unlock();
      g->abort(why);
      aborted = true;
      lk.lock();
    }
    if (cv.wait_for(lk, std::chrono::milliseconds(5), [&] { return left == 0; })) break;
    lk.unlock();
    if (tick) tick();
    lk.lock();
  }
  lk.unlock();
  bool failed = aborted;
  for (const auto& e : errors) failed = failed || e;
  // The job's reference goes first: a retired group is destroyed on its
  // reaper, never on the job's thread (its running collective may wait).
  g.reset();
  if (failed) retire(ranks);
  return errors;
}

void RankWorkers::retire(const std::vector<int>& ranks) {
  std::lock_guard lk(groups_mu_);
  auto it = groups_.find(dist::group_name(ranks, world()));
  if (it == groups_.end()) return;
  // Destroying a member waits for its running collective (bounded by the
  // collective timeout): not on the job's thread.
  reapers_.emplace_back([g = std::move(it->second)]() mutable { g.reset(); });
  groups_.erase(it);
}

}  // namespace tensord
