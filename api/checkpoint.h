// Tenant checkpoints: every stored tensor of a tenant in one safetensors file
// <dir>/<tenant>.safetensors, written atomically (temp file, fsync, rename,
// fsync of the directory) and restored at start (API.md section 10).
#pragma once

#include <cstdint>
#include <string>

namespace tensord {

struct Tenant;

struct CheckpointInfo {
  std::string path;
  int64_t tensors = 0;
  int64_t bytes = 0;
};

CheckpointInfo write_checkpoint(const std::string& dir, const Tenant& tenant);
// Loads <dir>/<tenant>.safetensors if present; returns how many tensors.
// A corrupt file is an error (the server refuses to start rather than lose data).
int64_t restore_checkpoint(const std::string& dir, Tenant& tenant);

}  // namespace tensord
