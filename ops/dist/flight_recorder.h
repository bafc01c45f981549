// FlightRecorder: the ring of the last N collectives one rank took part in,
// over all its groups (PyTorch's FlightRecorder): what each was, when it was
// scheduled, started and completed, and how far each group got. It shows
// which rank is stuck in which collective. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "ops/shape.h"

namespace tensord::dist {

enum class CollectiveState : uint8_t { kScheduled, kStarted, kCompleted };
std::string_view collective_state_name(CollectiveState s);  // "scheduled", ...

// One collective, in PyTorch's entry fields.
struct FlightRecord {
  uint64_t record_id = 0;  // assigned by record(), from 0, never reused
  int64_t pg_id = 0;
  std::string pg_name;  // "world", "ranks:1,3"
  std::string pg_desc;
  uint64_t collective_seq_id = 0;
  uint64_t p2p_seq_id = 0;
  uint64_t op_id = 0;
  std::string profiling_name;   // "gloo:all_reduce"
  int64_t time_created_ns = 0;  // Unix epoch
  std::vector<Shape> input_sizes;
  std::vector<DType> input_dtypes;
  std::vector<Shape> output_sizes;
  std::vector<DType> output_dtypes;
  std::optional<int64_t> time_discovered_started_ns;
  std::optional<int64_t> time_discovered_completed_ns;
  bool retired = false;  // finished, successfully or not
  int64_t timeout_ms = 0;
  bool is_p2p = false;

  CollectiveState state() const;
};

// A group as the dump's pg_config and pg_status show it.
struct FlightRecorderGroup {
  std::string name;
  std::string desc;
  int64_t pg_id = 0;
  std::vector<int> ranks;  // global ranks, in the group's order
  int64_t last_enqueued_collective = -1;
  int64_t last_started_collective = -1;
  int64_t last_completed_collective = -1;
};

struct FlightRecorderDump {
  std::string version;  // "2.10": PyTorch's layout version
  std::string comm_lib_version;
  int rank = 0;
  std::vector<FlightRecorderGroup> groups;  // in registration order
  std::vector<FlightRecord> entries;        // oldest first
};

class FlightRecorder {
 public:
  static constexpr size_t kDefaultCapacity = 2048;
  static constexpr const char* kVersion = "2.10";

  // `rank`: this recorder's global rank; `capacity`: entries kept (>= 1).
  explicit FlightRecorder(int rank, size_t capacity = kDefaultCapacity);

  int rank() const { return rank_; }
  size_t capacity() const { return capacity_; }
  void set_comm_lib_version(std::string version);
  // Adds (or replaces, by name) a group for pg_config / pg_status.
  void register_group(const std::string& name, const std::string& desc, int64_t pg_id, std::vector<int> ranks);

  // Appends a scheduled entry (its record_id and state fields are set
  // here), evicting the oldest when full; returns the record id.
  uint64_t record(FlightRecord entry);
  // State changes of an entry still in the ring (no-ops once evicted).
  void started(uint64_t record_id);
  // Success: completed, retired; `output_sizes` replaces the scheduled
  // guess when given (all_gather's size depends on the other ranks).
  void completed(uint64_t record_id, const std::vector<Shape>* output_sizes = nullptr);
  // Failure: retired, never completed (its state stays started/scheduled).
  void retired_failed(uint64_t record_id);

  FlightRecorderDump dump() const;

 private:
  FlightRecord* find(uint64_t record_id);               // mu_ held
  FlightRecorderGroup* group(const std::string& name);  // mu_ held

  const int rank_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::string comm_lib_version_;
  std::vector<FlightRecorderGroup> groups_;
  std::vector<FlightRecord> ring_;  // ring_[id % capacity_]
  uint64_t next_id_ = 0;
};

// Nanoseconds since the Unix epoch (the dump's timestamps).
int64_t unix_time_ns();

}  // namespace tensord::dist
