#include "graphs/graph_store.h"

#include <cstring>
#include <sstream>

#include "graphs/control_flow.h"
#include "ops/error.h"

namespace tensord {

std::shared_ptr<CapturedGraph> GraphStore::capture(const std::string& tenant,
                                                   const std::shared_ptr<MemoryAccount>& account, Backend* backend,
                                                   Device device, CompiledProgram cp, const std::string& pool_of,
                                                   const std::string& name) {
  return capture(
      tenant, account, backend, device, [&cp] { return std::move(cp); }, pool_of, name);
}

std::shared_ptr<CapturedGraph> GraphStore::capture(const std::string& tenant,
                                                   const std::shared_ptr<MemoryAccount>& account, Backend* backend,
                                                   Device device, const CompileFn& compile, const std::string& pool_of,
                                                   const std::string& name) {
  auto one = [&compile] {
    std::vector<std::shared_ptr<const CompiledProgram>> v;
    v.push_back(std::make_shared<const CompiledProgram>(compile()));
    return v;
  };
  return capture_members(tenant, account, backend, device, one, nullptr, pool_of, name, {}, {}, {});
}

std::shared_ptr<CapturedGraph> GraphStore::capture_spmd(const std::string& tenant,
                                                        const std::shared_ptr<MemoryAccount>& account, Backend* backend,
                                                        Device device, const CompileMembersFn& compile,
                                                        const BindScope& scope, const std::vector<int>& ranks,
                                                        const std::string& group, const std::string& name,
                                                        const FinishMembers& finish) {
  TENSORD_CHECK(!ranks.empty(), kInvalidArgument, "an SPMD graph needs a group");
  return capture_members(tenant, account, backend, device, compile, scope, {}, name, ranks, group, finish);
}

namespace {

// A program bound to static input buffers (allocated on `backend`, charged
// to `account`) and to chunks of `pool`, with its replay plan.
GraphMember bind_member(std::shared_ptr<const CompiledProgram> cp, std::shared_ptr<GraphPool> pool,
                        const std::shared_ptr<MemoryAccount>& account, Backend* backend, Device device,
                        bool device_graph) {
  GraphMember m;
  for (const auto& [input, vid] : cp->inputs) {
    const TensorMeta& meta = cp->values[static_cast<size_t>(vid)].meta;
    Tensor t = (backend && device.type == DeviceType::kCPU) ? Tensor::empty(backend, device, meta, account)
                                                            : Tensor::empty_host(meta);
    m.buffer_bytes += static_cast<int64_t>(t.nbytes());
    m.buffers.emplace(input, std::move(t));
  }
  m.program = std::move(cp);
  m.plan = std::make_shared<ReplayPlan>(m.program, m.buffers, *pool, backend, device, device_graph);
  m.pool = std::move(pool);
  return m;
}

}  // namespace

std::shared_ptr<CapturedGraph> GraphStore::capture_members(
    const std::string& tenant, const std::shared_ptr<MemoryAccount>& account, Backend* backend, Device device,
    const CompileMembersFn& compile, const BindScope& scope, const std::string& pool_of, const std::string& name,
    const std::vector<int>& ranks, const std::string& group, const FinishMembers& finish) {
  std::shared_ptr<GraphPool> pool;
  std::string pool_id;
  if (!pool_of.empty()) {
    auto other = find(tenant, pool_of);
    if (!other) throw Error(ErrorCode::kNotFound, "pool: graph '" + pool_of + "' not found");
    if (other->spmd) {
      throw Error(ErrorCode::kBadRequest,
                  "pool: graph '" + pool_of + "' was captured with ranks; its ranks' pools are its own");
    }
    pool = other->pool;
    pool_id = other->pool_id;
  }
  const std::string id = "g-" + std::to_string(next_.fetch_add(1));
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!name.empty()) {
      if (names_.contains({tenant, name})) throw Error(ErrorCode::kConflict, "a graph named '" + name + "' exists");
      names_[{tenant, name}] = id;
    }
    GraphInfo& info = capturing_[{tenant, id}];
    info.id = id;
    info.name = name;
    info.is_capturing = true;
    info.pool = pool_id.empty() ? id : pool_id;
    info.ranks = ranks;
    info.group = group;
  }
  // Whatever throws below (bad program, quota_exceeded, unsupported) frees
  // the reservation; the buffers and pool chunks go with g.
  auto release = [&] {
    std::lock_guard<std::mutex> lk(mu_);
    capturing_.erase({tenant, id});
    if (!name.empty()) names_.erase({tenant, name});
  };
  try {
    std::vector<std::shared_ptr<const CompiledProgram>> programs = compile();
    TENSORD_CHECK(!programs.empty() && (ranks.empty() ? programs.size() == 1 : programs.size() == ranks.size()),
                  kInternal, "a capture compiled " + std::to_string(programs.size()) + " programs");
    {
      std::lock_guard<std::mutex> lk(mu_);
      capturing_[{tenant, id}].nodes = static_cast<int64_t>(programs[0]->nodes.size());
    }
    const bool host = !backend || device.type != DeviceType::kCPU;
    auto g = std::make_shared<CapturedGraph>();
    g->tenant = tenant;
    if (ranks.empty()) {
      if (!pool) pool = std::make_shared<GraphPool>(host ? nullptr : backend, device, account);
      GraphMember m = bind_member(std::move(programs[0]), std::move(pool), account, backend, device, true);
      g->buffer_bytes = m.buffer_bytes;
      g->buffers = std::move(m.buffers);
      g->program = std::move(m.program);
      g->plan = std::move(m.plan);
      g->pool = std::move(m.pool);
    } else {
      // The ranks run at once: a pool each.
      auto sg = std::make_shared<SpmdGraph>();
      sg->ranks = ranks;
      sg->group = group;
      for (auto& cp : programs) {
        auto own = std::make_shared<GraphPool>(host ? nullptr : backend, device, account);
        auto bind = [&] {
          sg->members.push_back(bind_member(std::move(cp), std::move(own), account, backend, device, false));
        };
        if (scope) {
          scope(bind);
        } else {
          bind();
        }
      }
      if (finish) finish(*sg);
      const GraphMember& first = sg->members[0];
      g->buffer_bytes = first.buffer_bytes;
      g->buffers = first.buffers;
      g->program = first.program;
      g->plan = first.plan;
      g->pool = first.pool;
      g->spmd = std::move(sg);
    }
    g->id = id;
    g->pool_id = pool_id.empty() ? id : pool_id;
    g->name = name;
    std::lock_guard<std::mutex> lk(mu_);
    capturing_.erase({tenant, id});
    graphs_[{tenant, id}] = g;
    return g;
  } catch (...) {
    release();
    throw;
  }
}

void GraphStore::check_name_free(const std::string& tenant, const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (names_.contains({tenant, name})) throw Error(ErrorCode::kConflict, "a graph named '" + name + "' exists");
}

std::shared_ptr<CapturedGraph> GraphStore::find_by_name_or_id(const std::string& tenant,
                                                              const std::string& model) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto n = names_.find({tenant, model});
  auto it = graphs_.find({tenant, n == names_.end() ? model : n->second});
  return it == graphs_.end() ? nullptr : it->second;
}

std::shared_ptr<CapturedGraph> GraphStore::find(const std::string& tenant, const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = graphs_.find({tenant, id});
  return it == graphs_.end() ? nullptr : it->second;
}

std::optional<GraphInfo> GraphStore::info(const std::string& tenant, const std::string& id) const {
  std::shared_ptr<CapturedGraph> g;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto c = capturing_.find({tenant, id});
    if (c != capturing_.end()) return c->second;
    auto it = graphs_.find({tenant, id});
    if (it == graphs_.end()) return std::nullopt;
    g = it->second;
  }
  return graph_info(*g);  // bytes() asks the pool: outside the store's lock
}

bool GraphStore::capturing(const std::string& tenant, const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return capturing_.contains({tenant, id});
}

GraphInfo graph_info(const CapturedGraph& g) {
  GraphInfo info;
  info.id = g.id;
  info.name = g.name;
  info.nodes = g.nodes();
  info.bytes = g.bytes();
  info.replays = g.replays.load();
  info.pool = g.pool_id;
  if (g.spmd) {
    info.ranks = g.spmd->ranks;
    info.group = g.spmd->group;
  }
  return info;
}

bool GraphStore::erase(const std::string& tenant, const std::string& id) {
  std::shared_ptr<CapturedGraph> g;  // destroyed outside the lock
  std::lock_guard<std::mutex> lk(mu_);
  auto it = graphs_.find({tenant, id});
  if (it == graphs_.end()) return false;
  g = std::move(it->second);
  graphs_.erase(it);
  if (!g->name.empty()) names_.erase({tenant, g->name});
  return true;
}

size_t GraphStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return graphs_.size();
}

std::vector<std::shared_ptr<CapturedGraph>> GraphStore::list(const std::string& tenant) const {
  std::vector<std::shared_ptr<CapturedGraph>> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = graphs_.lower_bound({tenant, std::string()}); it != graphs_.end() && it->first.first == tenant; ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<std::shared_ptr<CapturedGraph>> GraphStore::list_all() const {
  std::vector<std::shared_ptr<CapturedGraph>> out;
  std::lock_guard<std::mutex> lk(mu_);
  out.reserve(graphs_.size());
  for (const auto& [key, g] : graphs_) out.push_back(g);
  return out;
}

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

void dot_body(std::ostringstream& os, const CompiledProgram& cp, const std::string& prefix, int depth) {
  const std::string ind(static_cast<size_t>(2 * depth + 2), ' ');
  auto vname = [&](int v) { return prefix + "v" + std::to_string(v); };
  for (size_t v = 0; v < cp.values.size(); ++v) {
    const ValueInfo& vi = cp.values[v];
    if (vi.source == ValueInfo::Source::kNode) continue;
    std::string label = vi.source == ValueInfo::Source::kInput    ? vi.name
                        : vi.source == ValueInfo::Source::kStored ? "$stored/" + vi.name
                                                                  : std::string("const");
    os << ind << '"' << vname(static_cast<int>(v)) << "\" [shape=ellipse,label=\"" << esc(label) << "\\n"
       << esc(vi.meta.str()) << "\"];\n";
  }
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    const std::string nid = prefix + "n" + std::to_string(i);
    os << ind << '"' << nid << "\" [shape=box,label=\"" << esc(b.id) << "\\n"
       << esc(b.op ? b.op->name : "?") << "\"];\n";
    for (const auto& ids : b.tensor_params) {
      for (int v : ids) {
        const ValueInfo& vi = cp.values[static_cast<size_t>(v)];
        std::string from =
            vi.source == ValueInfo::Source::kNode ? prefix + "n" + std::to_string(vi.producer) : vname(v);
        os << ind << '"' << from << "\" -> \"" << nid << "\" [label=\"" << esc(vi.name) << "\\n"
           << esc(vi.meta.str()) << "\"];\n";
      }
    }
    if (b.control) {
      for (const auto& [key, body] : b.control->bodies) {
        const std::string sub = nid + "_" + key + "_";
        os << ind << "subgraph \"cluster_" << sub << "\" {\n"
           << ind << "  label=\"" << esc(b.id + "." + key) << "\";\n";
        dot_body(os, *body, sub, depth + 1);
        os << ind << "}\n";
      }
    }
  }
  for (const auto& [name, id] : cp.outputs) {
    const ValueInfo& vi = cp.values[static_cast<size_t>(id)];
    const std::string oid = prefix + "out_" + name;
    os << ind << '"' << esc(oid) << "\" [shape=ellipse,style=bold,label=\"" << esc(name) << "\"];\n";
    std::string from = vi.source == ValueInfo::Source::kNode ? prefix + "n" + std::to_string(vi.producer) : vname(id);
    os << ind << '"' << from << "\" -> \"" << esc(oid) << "\";\n";
  }
}

}  // namespace

std::string graph_to_dot(const CompiledProgram& cp, const std::string& name) {
  std::ostringstream os;
  os << "digraph \"" << esc(name) << "\" {\n  rankdir=TB;\n";
  dot_body(os, cp, "", 0);
  os << "}\n";
  return os.str();
}

}  // namespace tensord
