// The /v1/run programs a tenant sent lately, compiled: a client that sends
// the same small program again and again (an optimizer step per batch, a
// tiny op per token) skips validation, binding, shape inference and the
// memory plan. Programs are values: the key is the program's sha256 (of its
// JSON as parsed, api/program_json.h) and the inputs' dtypes and shapes,
// under the tenant's name, so one tenant's entry never serves another. Only
// programs whose compile read no stored tensor are kept (a stored tensor
// may be replaced, deleted or charged to the tenant; such a program is
// compiled every time), and only with at most kMostConstantBytes of inline
// constants (an entry's memory is no tenant's quota). Each tenant keeps its
// kPerTenant most recently used entries. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "ops/tensor.h"

namespace tensord {

struct CompiledProgram;

class CompileCache {
 public:
  static constexpr size_t kPerTenant = 64;
  static constexpr size_t kMostConstantBytes = size_t{64} << 10;

  // "<sha256>|name:dtype[shape];..." for the inputs in name order; "" when
  // there is no sha256 or an input is an MX tensor (nothing is cached then).
  static std::string key(const std::string& program_sha256, const std::map<std::string, TensorMeta>& inputs);
  // Whether `cp`, compiled without a stored-tensor lookup, may be kept.
  static bool keepable(const CompiledProgram& cp);

  std::shared_ptr<const CompiledProgram> find(const std::string& tenant, const std::string& key);
  void put(const std::string& tenant, const std::string& key, std::shared_ptr<const CompiledProgram> cp);

  uint64_t hits() const;
  size_t size(const std::string& tenant) const;

 private:
  struct Tenant {
    std::list<std::pair<std::string, std::shared_ptr<const CompiledProgram>>> lru;  // most recent first
    std::unordered_map<std::string, decltype(lru)::iterator> by_key;
  };
  mutable std::mutex mu_;
  std::map<std::string, Tenant, std::less<>> tenants_;
  uint64_t hits_ = 0;
};

}  // namespace tensord
