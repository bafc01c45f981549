#include "graphs/control_plan.h"

#include <cstring>
#include <map>
#include <string>

#include "graphs/control_flow_run.h"
#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "ops/error.h"

namespace tensord {
namespace {

bool writes_stored(const CompiledProgram& cp) {
  for (const BoundNode& b : cp.nodes) {
    if (!b.writes_stored.empty()) return true;
    if (!b.control) continue;
    for (const auto& [key, body] : b.control->bodies) {
      if (writes_stored(*body)) return true;
    }
  }
  return false;
}

std::map<std::string, Tensor> by_name(const CompiledProgram& cp, const std::vector<Tensor>& ts) {
  std::map<std::string, Tensor> m;
  for (size_t k = 0; k < cp.inputs.size(); ++k) m.emplace(cp.inputs[k].first, ts.at(k));
  return m;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const char* pa = static_cast<const char*>(a.data());
  const char* pb = static_cast<const char*>(b.data());
  return a.nbytes() && b.nbytes() && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.data() != src.data() && dst.nbytes()) std::memmove(dst.data(), src.data(), dst.nbytes());
}

}  // namespace

bool ControlPlan::eligible(const BoundNode& b) {
  if (!b.control) return false;
  const ControlFlow& cf = *b.control;
  if (cf.kind != ControlKind::kCond && cf.kind != ControlKind::kWhileLoop) return false;
  for (const auto& [key, body] : cf.bodies) {
    if (writes_stored(*body)) return false;
  }
  return true;
}

ControlPlan::ControlPlan(const BoundNode& b, const std::vector<Tensor>& operands, Backend* backend,
                         std::shared_ptr<MemoryAccount> account)
    : b_(b), operands_(operands) {
  const ControlFlow& cf = *b.control;
  auto plan = [&](const std::shared_ptr<const CompiledProgram>& body, const std::vector<Tensor>& inputs) {
    pools_.push_back(std::make_unique<GraphPool>(backend, Device{}, account));
    return std::make_unique<ReplayPlan>(body, by_name(*body, inputs), *pools_.back(), backend, Device{});
  };
  if (cf.kind == ControlKind::kCond) {
    const std::vector<Tensor> args(operands.begin() + 1, operands.end());
    then_or_cond_ = plan(cf.bodies.at("then"), args);
    else_or_body_ = plan(cf.bodies.at("else"), args);
    return;
  }
  OpContext alloc;  // charged to the tenant, host or backend memory as the parent's
  alloc.backend = backend;
  alloc.account = account;
  const CompiledProgram& body = *cf.bodies.at("body");
  for (const auto& [name, id] : body.inputs) {
    const TensorMeta& m = body.values[static_cast<size_t>(id)].meta;
    carries_.push_back(alloc.empty(m.dtype, m.shape));
    staging_.push_back(alloc.empty(m.dtype, m.shape));
    carry_bytes_ += 2 * static_cast<int64_t>(carries_.back().nbytes());
  }
  then_or_cond_ = plan(cf.bodies.at("cond"), carries_);
  else_or_body_ = plan(cf.bodies.at("body"), carries_);
}

ControlPlan::~ControlPlan() = default;

int64_t ControlPlan::bytes() const {
  int64_t n = carry_bytes_ + then_or_cond_->extra_bytes() + else_or_body_->extra_bytes();
  for (const auto& p : pools_) n += p->reserved();
  return n;
}

std::vector<Tensor> ControlPlan::run(const ExecOptions& opts) {
  const ControlFlow& cf = *b_.control;
  if (cf.kind == ControlKind::kCond) {
    const bool pred = *static_cast<const uint8_t*>(operands_[0].data()) != 0;
    return (pred ? then_or_cond_ : else_or_body_)->run_views(opts);
  }
  for (size_t k = 0; k < carries_.size(); ++k) copy_into(carries_[k], operands_[k]);
  for (int64_t it = 0;; ++it) {
    check_control_running(opts, cf, it, b_.id);
    const std::vector<Tensor> go = then_or_cond_->run_views(opts);
    if (*static_cast<const uint8_t*>(go.at(0).data()) == 0) break;
    if (it >= cf.max_iters) throw_past_max_iters(cf, b_.id);
    const std::vector<Tensor> out = else_or_body_->run_views(opts);
    // A result in (or over) another carry's buffer, say a swap, is staged
    // before any carry is overwritten.
    bool stage = false;
    for (size_t k = 0; k < out.size() && !stage; ++k) {
      for (size_t j = 0; j < carries_.size() && !stage; ++j) stage = j != k && overlaps(out[k], carries_[j]);
    }
    for (size_t k = 0; k < carries_.size(); ++k) {
      if (stage) {
        copy_into(staging_[k], out[k]);
      } else {
        copy_into(carries_[k], out[k]);
      }
    }
    if (stage) {
      for (size_t k = 0; k < carries_.size(); ++k) copy_into(carries_[k], staging_[k]);
    }
  }
  return carries_;
}

}  // namespace tensord
