#include "scheduler/compile_cache.h"

#include <charconv>

#include "graphs/compiled_program.h"
#include "ops/dtype.h"

namespace tensord {

std::string CompileCache::key(const std::string& program_sha256, const std::map<std::string, TensorMeta>& inputs) {
  if (program_sha256.empty()) return {};
  std::string k = program_sha256;
  k += '|';
  char num[24];
  for (const auto& [name, m] : inputs) {
    if (m.mx || m.wrapped_number) return {};  // an MX input: compiled every time (its layout is not in the key)
    k += name;
    k += ':';
    k += dtype_name(m.dtype);
    k += '[';
    for (int64_t d : m.shape) {
      const auto r = std::to_chars(num, num + sizeof num, d);
      k.append(num, r.ptr);
      k += ',';
    }
    k += "];";
  }
  return k;
}

bool CompileCache::keepable(const CompiledProgram& cp) {
  size_t bytes = 0;
  for (const Tensor& t : cp.constants) {
    if (t.defined()) bytes += t.nbytes();
  }
  return bytes <= kMostConstantBytes;
}

std::shared_ptr<const CompiledProgram> CompileCache::find(const std::string& tenant, const std::string& key) {
  if (key.empty()) return nullptr;
  std::lock_guard lock(mu_);
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return nullptr;
  auto it = t->second.by_key.find(key);
  if (it == t->second.by_key.end()) return nullptr;
  ++hits_;
  t->second.lru.splice(t->second.lru.begin(), t->second.lru, it->second);  // now the most recent
  return it->second->second;
}

void CompileCache::put(const std::string& tenant, const std::string& key, std::shared_ptr<const CompiledProgram> cp) {
  if (key.empty() || !cp) return;
  std::lock_guard lock(mu_);
  Tenant& t = tenants_[tenant];
  if (auto it = t.by_key.find(key); it != t.by_key.end()) {
    it->second->second = std::move(cp);
    t.lru.splice(t.lru.begin(), t.lru, it->second);
    return;
  }
  t.lru.emplace_front(key, std::move(cp));
  t.by_key.emplace(key, t.lru.begin());
  while (t.lru.size() > kPerTenant) {
    t.by_key.erase(t.lru.back().first);
    t.lru.pop_back();
  }
}

uint64_t CompileCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

size_t CompileCache::size(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.lru.size();
}

}  // namespace tensord
