// Tenant checkpoints: every stored tensor of a tenant (optimizer state
// included) in one safetensors file <dir>/<tenant>.safetensors, written
// atomically (a unique temp file, fsync, rename, fsync of the directory) and
// restored at start (API.md section 10).
#pragma once

#include <cstdint>
#include <string>

namespace tensord {

struct Tenant;

struct CheckpointInfo {
  std::string path;
  int64_t tensors = 0;
  int64_t bytes = 0;
  uint64_t version = 0;  // the store's version that was written (TensorStore::version)
};

// Writes the tenant's tensors; concurrent calls for one tenant each write
// their own temp file, and the last rename wins. Throws Error(kInternal) on
// an I/O failure (the previous file stays as it was).
CheckpointInfo write_checkpoint(const std::string& dir, const Tenant& tenant);

struct RestoreInfo {
  std::string path;
  int64_t tensors = 0;  // restored
  int64_t bytes = 0;
  bool over_quota = false;  // restored past the tenant's (shrunk) quota
  std::string skipped;      // non-empty: the file was corrupt or unreadable, nothing loaded (why)
  int removed_temps = 0;    // stale temp files of interrupted writes, removed
};

// Loads <dir>/<tenant>.safetensors if present, all or nothing: a torn or
// corrupt file is skipped (RestoreInfo::skipped says why), never half-loaded,
// and never an exception. Past the tenant's quota it still loads
// (over_quota). Removes stale temp files of writes a crash interrupted.
RestoreInfo restore_checkpoint(const std::string& dir, Tenant& tenant);

}  // namespace tensord
