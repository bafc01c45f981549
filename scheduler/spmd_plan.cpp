#include "scheduler/spmd_plan.h"

#include <algorithm>

#include "ops/dist/dim_layout.h"
#include "ops/dist/process_group.h"
#include "ops/dist/spmd_infer.h"
#include "ops/error.h"

namespace tensord {

namespace {

[[noreturn]] void bad(const std::string& m) {
  throw Error(ErrorCode::kBadRequest, m);
}

}  // namespace

std::vector<int> spmd_group(const SpmdRequest& s, int world) {
  std::vector<int> ranks;
  if (s.count > 0) {
    if (s.count != world) {
      bad("request.ranks is " + std::to_string(s.count) + " but this server's world has " + std::to_string(world) +
          " ranks (a subgroup is a list: \"ranks\": [0, 1])");
    }
    for (int r = 0; r < world; ++r) ranks.push_back(r);
    return ranks;
  }
  if (s.ranks.empty()) bad("request.ranks must name at least one rank");
  std::set<int> seen;
  for (int r : s.ranks) {
    if (r < 0 || r >= world) {
      bad("request.ranks: rank " + std::to_string(r) + " is outside the world of " + std::to_string(world) + " ranks");
    }
    if (!seen.insert(r).second) bad("request.ranks: rank " + std::to_string(r) + " is listed twice");
  }
  return s.ranks;
}

namespace {

// torch.tensor_split(t, n, dim): the first (len % n) parts one longer.
std::vector<Tensor> split(const std::string& name, const Tensor& t, int64_t dim, size_t n) {
  if (t.dim() == 0) bad("inputs." + name + ": a 0-d tensor cannot be sharded");
  const int64_t nd = t.dim();
  const int64_t d = dim < 0 ? dim + nd : dim;
  if (d < 0 || d >= nd) {
    bad("inputs." + name + ": shard dim " + std::to_string(dim) + " is out of range for " + t.meta().str());
  }
  const Tensor src = t.to_host();
  const dist::DimLayout l(src.shape(), d, dtype_size(src.dtype()));
  std::vector<Tensor> parts;
  const auto ni = static_cast<int64_t>(n);
  int64_t start = 0;
  for (int64_t i = 0; i < ni; ++i) {
    const int64_t count = l.len / ni + (i < l.len % ni ? 1 : 0);
    Shape s = src.shape();
    s[static_cast<size_t>(d)] = count;
    Tensor part = Tensor::empty_host(src.dtype(), s);
    if (part.nbytes() > 0) dist::copy_slices_out(src.data(), l, start, count, part.data());
    parts.push_back(std::move(part));
    start += count;
  }
  return parts;
}

std::vector<std::map<std::string, Tensor>> rank_inputs(const JobSpec& spec, size_t n) {
  std::vector<std::map<std::string, Tensor>> in(n, spec.inputs);
  for (const auto& [name, si] : spec.spmd->inputs) {
    if (spec.inputs.count(name)) bad("input '" + name + "' is given twice");
    std::vector<Tensor> parts = si.shard.defined() ? split(name, si.shard, si.dim, n) : si.per_rank;
    if (parts.size() != n) {
      bad("inputs." + name + ": " + std::to_string(parts.size()) + " per_rank tensors for a group of " +
          std::to_string(n) + " ranks");
    }
    for (size_t i = 0; i < n; ++i) in[i][name] = std::move(parts[i]);
  }
  return in;
}

const TensorMeta& operand_meta(const CompiledProgram& cp, const BoundNode& b) {
  return cp.values[static_cast<size_t>(b.tensor_params[0][0])].meta;
}

// Ranks must agree at each collective before any enters it: equal metas
// (all_gather: equal but along its dim).
void check_collectives(const SpmdPlan& p) {
  const CompiledProgram& first = *p.programs[0];
  for (size_t k = 0; k < first.nodes.size(); ++k) {
    const BoundNode& b = first.nodes[k];
    if (!b.op || !b.op->collective || b.tensor_params.empty() || b.tensor_params[0].empty()) continue;
    const TensorMeta& m0 = operand_meta(first, b);
    int64_t gather_dim = -1;
    if (b.op->rank_varying_dim >= 0) {
      gather_dim = b.attrs[static_cast<size_t>(b.op->rank_varying_dim)].to_int("dim");
      if (gather_dim < 0) gather_dim += m0.dim();
    }
    for (size_t i = 1; i < p.programs.size(); ++i) {
      const TensorMeta& mi = operand_meta(*p.programs[i], p.programs[i]->nodes[k]);
      const std::string where = b.op->name + ": rank " + std::to_string(p.ranks[i]) + " has " + mi.str() +
                                " where rank " + std::to_string(p.ranks[0]) + " has " + m0.str();
      if (mi.dtype != m0.dtype) throw Error(ErrorCode::kDtypeMismatch, where, b.id);
      bool same = mi.shape.size() == m0.shape.size();
      for (size_t d = 0; same && d < mi.shape.size(); ++d) {
        same = static_cast<int64_t>(d) == gather_dim || mi.shape[d] == m0.shape[d];
      }
      if (!same) throw Error(ErrorCode::kShapeMismatch, where, b.id);
    }
  }
}

bool seeded(const BoundNode& b) {
  const int i = b.op->param_index("seed");
  return i >= 0 && !b.attrs[static_cast<size_t>(i)].is_none();
}

// Which values are equal on every rank: replicated inputs, stored tensors
// and constants; the results of the ops whose OpDef::replication says so
// (all_reduce, all_gather, broadcast); and of any other node whose
// operands all are (random ops only with a seed).
// A control-flow node counts as any other node.
std::set<int> replicated_values(const CompiledProgram& cp, const SpmdRequest* s) {
  std::set<int> rep;
  for (size_t v = 0; v < cp.values.size(); ++v) {
    const ValueInfo& vi = cp.values[v];
    if (vi.source == ValueInfo::Source::kStored || vi.source == ValueInfo::Source::kConstant ||
        (vi.source == ValueInfo::Source::kInput && !(s && s->inputs.count(vi.name)))) {
      rep.insert(static_cast<int>(v));
    }
  }
  for (const BoundNode& b : cp.nodes) {  // topological order
    bool r = true;
    const RankReplication how = b.op ? b.op->replication : RankReplication::kFollowsOperands;
    if (how == RankReplication::kReplicated) {
      r = true;
    } else if (how == RankReplication::kPerRank || (how == RankReplication::kWhenSeeded && !seeded(b))) {
      r = false;
    } else {
      for (const auto& ids : b.tensor_params) {
        for (int v : ids) r = r && rep.count(v) > 0;
      }
    }
    if (r) rep.insert(b.outputs.begin(), b.outputs.end());
  }
  return rep;
}

void check_stored_writes(const SpmdPlan& p, const JobSpec& spec) {
  const CompiledProgram& cp = *p.programs[0];
  for (const BoundNode& b : cp.nodes) {
    // In-place writes to stored tensors and the optimizers (which write
    // params and state through the job's StoredIO) commit rank 0's values:
    // every rank's must be the same.
    const bool writes = !b.writes_stored.empty() || (b.op && b.op->writes_stored_state);
    if (!writes) continue;
    for (const auto& ids : b.tensor_params) {
      for (int v : ids) {
        if (!p.replicated.count(v)) {
          throw Error(ErrorCode::kInvalidArgument,
                      b.op->name + " writes stored tensors from '" + cp.values[static_cast<size_t>(v)].name +
                          "', which differs across ranks (all_reduce it first)",
                      b.id);
        }
      }
    }
  }
  for (const auto& [output, stored] : spec.store) {
    bool is_output = false;
    for (const auto& [o, id] : cp.outputs) is_output = is_output || o == output;
    // Not an output at all: the engine's 400 says so.
    if (is_output && !p.is_replicated_output(output)) {
      throw Error(ErrorCode::kInvalidArgument, "store: output '" + output + "' differs across ranks; only a " +
                                                   "replicated value can become stored tensor '" + stored + "'");
    }
  }
}

}  // namespace

bool SpmdPlan::is_replicated_output(const std::string& name) const {
  for (const auto& [o, id] : programs[0]->outputs) {
    if (o == name) return replicated.count(id) > 0;
  }
  return false;
}

void compile_spmd(SpmdPlan& p, const Program& program, const std::vector<std::map<std::string, TensorMeta>>& metas,
                  const StoredLookup& stored) {
  const size_t n = metas.size();
  // Compile every rank; an all_gather's result extent depends on every
  // rank's operand, so compile again with the extents seen until they
  // settle (one more pass per chained gather of uneven parts).
  std::map<std::string, std::vector<int64_t>> extents;
  for (int pass = 0;; ++pass) {
    p.programs.clear();
    std::map<std::string, std::vector<int64_t>> seen;
    for (size_t i = 0; i < n; ++i) {
      dist::SpmdInferContext ic;
      ic.group_size = static_cast<int>(n);
      ic.gather_extents = extents;
      {
        dist::SpmdInferScope scope(ic);
        p.programs.push_back(std::make_shared<const CompiledProgram>(compile_program(program, metas[i], stored)));
      }
      for (const auto& [node, e] : ic.seen_extents) {
        auto& v = seen[node];
        v.resize(n, 0);
        v[i] = e;
      }
    }
    if (seen == extents || pass == 16) break;
    extents = std::move(seen);
  }
  p.gather_extents = std::move(extents);
  check_collectives(p);
}

void in_spmd_infer_scope(const SpmdPlan& p, const std::function<void()>& f) {
  dist::SpmdInferContext ic;
  ic.group_size = static_cast<int>(p.ranks.size());
  ic.gather_extents = p.gather_extents;
  dist::SpmdInferScope scope(ic);
  f();
}

void compile_spmd_declared(SpmdPlan& p, const Program& program, const std::map<std::string, TensorMeta>& same,
                           const std::map<std::string, std::vector<TensorMeta>>& per_rank, const StoredLookup& stored) {
  const size_t n = p.ranks.size();
  std::vector<std::map<std::string, TensorMeta>> metas(n, same);
  for (const auto& [name, each] : per_rank) {
    if (each.size() != n) {
      bad("inputs." + name + ": " + std::to_string(each.size()) + " per_rank declarations for a group of " +
          std::to_string(n) + " ranks");
    }
    for (size_t i = 0; i < n; ++i) metas[i][name] = each[i];
  }
  compile_spmd(p, program, metas, stored);
}

std::string spmd_group_name(const std::vector<int>& ranks, int world) {
  return dist::group_name(ranks, world);
}

SpmdPlan plan_spmd(const JobSpec& spec, const StoredLookup& stored, int world) {
  SpmdPlan p;
  p.ranks = spmd_group(*spec.spmd, world);
  p.group = dist::group_name(p.ranks, world);
  const size_t n = p.ranks.size();
  p.inputs = rank_inputs(spec, n);
  std::vector<std::map<std::string, TensorMeta>> metas(n);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [name, t] : p.inputs[i]) metas[i][name] = t.meta();
  }
  compile_spmd(p, spec.program, metas, stored);
  p.replicated = replicated_values(*p.programs[0], &*spec.spmd);
  check_stored_writes(p, spec);
  return p;
}

SpmdPlan plan_spmd_replay(const JobSpec& spec, const std::vector<int>& ranks, const std::string& group,
                          std::vector<std::shared_ptr<const CompiledProgram>> programs, int world) {
  const SpmdRequest* s = spec.spmd ? &*spec.spmd : nullptr;
  if (s && !s->part_key.empty()) bad("request.spmd_part: a graph replay runs on this server's ranks only");
  if (s && (s->count > 0 || !s->ranks.empty()) && spmd_group(*s, world) != ranks) {
    bad("request.ranks: the graph was captured for group " + group + "; a replay runs on that group only");
  }
  SpmdPlan p;
  p.ranks = ranks;
  p.group = group;
  p.programs = std::move(programs);
  if (s) {
    p.inputs = rank_inputs(spec, ranks.size());
  } else {
    p.inputs.assign(ranks.size(), spec.inputs);
  }
  p.replicated = replicated_values(*p.programs[0], s);
  check_stored_writes(p, spec);
  return p;
}

}  // namespace tensord
