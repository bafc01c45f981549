#include "ops/dist/flight_recorder.h"

#include <chrono>
#include <utility>

#include "ops/error.h"

namespace tensord::dist {

std::string_view collective_state_name(CollectiveState s) {
  switch (s) {
    case CollectiveState::kScheduled:
      return "scheduled";
    case CollectiveState::kStarted:
      return "started";
    case CollectiveState::kCompleted:
      return "completed";
  }
  return "scheduled";
}

CollectiveState FlightRecord::state() const {
  if (time_discovered_completed_ns) return CollectiveState::kCompleted;
  if (time_discovered_started_ns) return CollectiveState::kStarted;
  return CollectiveState::kScheduled;
}

int64_t unix_time_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(int rank, size_t capacity) : rank_(rank), capacity_(capacity) {
  TENSORD_CHECK(capacity >= 1, kInvalidArgument, "the flight recorder needs at least one entry");
}

void FlightRecorder::set_comm_lib_version(std::string version) {
  std::lock_guard lock(mu_);
  comm_lib_version_ = std::move(version);
}

void FlightRecorder::register_group(const std::string& name, const std::string& desc, int64_t pg_id,
                                    std::vector<int> ranks) {
  std::lock_guard lock(mu_);
  FlightRecorderGroup* g = group(name);
  if (!g) {
    groups_.emplace_back();
    g = &groups_.back();
    g->name = name;
  }
  g->desc = desc;
  g->pg_id = pg_id;
  g->ranks = std::move(ranks);
}

FlightRecorderGroup* FlightRecorder::group(const std::string& name) {
  for (auto& g : groups_)
    if (g.name == name) return &g;
  return nullptr;
}

FlightRecord* FlightRecorder::find(uint64_t record_id) {
  if (record_id >= next_id_ || next_id_ - record_id > capacity_) return nullptr;  // future or evicted
  return &ring_[record_id % capacity_];
}

uint64_t FlightRecorder::record(FlightRecord entry) {
  std::lock_guard lock(mu_);
  entry.record_id = next_id_++;
  entry.time_discovered_started_ns.reset();
  entry.time_discovered_completed_ns.reset();
  entry.retired = false;
  if (entry.time_created_ns == 0) entry.time_created_ns = unix_time_ns();
  if (FlightRecorderGroup* g = group(entry.pg_name)) {
    g->last_enqueued_collective = static_cast<int64_t>(entry.collective_seq_id);
  }
  const uint64_t id = entry.record_id;
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(entry));
  } else {
    ring_[id % capacity_] = std::move(entry);
  }
  return id;
}

void FlightRecorder::started(uint64_t record_id) {
  std::lock_guard lock(mu_);
  FlightRecord* e = find(record_id);
  if (!e) return;
  e->time_discovered_started_ns = unix_time_ns();
  if (FlightRecorderGroup* g = group(e->pg_name)) {
    g->last_started_collective = static_cast<int64_t>(e->collective_seq_id);
  }
}

void FlightRecorder::completed(uint64_t record_id, const std::vector<Shape>* output_sizes) {
  std::lock_guard lock(mu_);
  FlightRecord* e = find(record_id);
  if (!e) return;
  const int64_t now = unix_time_ns();
  if (!e->time_discovered_started_ns) e->time_discovered_started_ns = now;
  e->time_discovered_completed_ns = now;
  e->retired = true;
  if (output_sizes) e->output_sizes = *output_sizes;
  if (FlightRecorderGroup* g = group(e->pg_name)) {
    g->last_completed_collective = static_cast<int64_t>(e->collective_seq_id);
  }
}

void FlightRecorder::retired_failed(uint64_t record_id) {
  std::lock_guard lock(mu_);
  if (FlightRecord* e = find(record_id)) e->retired = true;
}

FlightRecorderDump FlightRecorder::dump() const {
  std::lock_guard lock(mu_);
  FlightRecorderDump d;
  d.version = kVersion;
  d.comm_lib_version = comm_lib_version_;
  d.rank = rank_;
  d.groups = groups_;
  d.entries.reserve(ring_.size());
  const uint64_t first = next_id_ > ring_.size() ? next_id_ - ring_.size() : 0;
  for (uint64_t id = first; id < next_id_; ++id) d.entries.push_back(ring_[id % capacity_]);
  return d;
}

}  // namespace tensord::dist
