#include "graphs/control_flow_ops.h"

#include <utility>

namespace tensord {
namespace {

ParamSpec param(std::string name, ParamKind kind, Attr def = {}, bool optional = false, bool kwarg_only = false) {
  ParamSpec p;
  p.name = std::move(name);
  p.kind = kind;
  p.default_value = std::move(def);
  p.optional = optional;
  p.kwarg_only = kwarg_only;
  return p;
}

ControlFlowOpSpec spec(std::string name, std::string signature, std::string doc, std::vector<ParamSpec> params,
                       std::vector<std::string> outputs, std::vector<std::string> subprograms,
                       std::string dtype_note = {}) {
  ControlFlowOpSpec s;
  s.name = std::move(name);
  s.signature = std::move(signature);
  s.doc = std::move(doc);
  s.params = std::move(params);
  s.outputs = std::move(outputs);
  s.subprograms = std::move(subprograms);
  s.dtypes = dtypes_all();
  s.dtype_note = std::move(dtype_note);
  return s;
}

std::vector<ControlFlowOpSpec> make_specs() {
  constexpr auto kList = ParamKind::kTensorList;
  std::vector<ControlFlowOpSpec> v;
  v.push_back(spec("associative_scan",
                   "associative_scan(Tensor[] xs, *, int dim=0, bool reverse=False, str combine_mode=\"pointwise\") "
                   "-> Tensor[]",
                   "inclusive scan of xs along dim with the associative combine_fn(a..., b...) -> (c...)",
                   {param("xs", kList), param("dim", ParamKind::kInt, int64_t{0}, false, true),
                    param("reverse", ParamKind::kBool, false, false, true),
                    param("combine_mode", ParamKind::kString, "pointwise", false, true)},
                   {"ys"}, {"combine_fn"}));
  v.push_back(spec("cond", "cond(Tensor pred, Tensor[] operands) -> Tensor[]",
                   "then(*operands) if pred else else(*operands); both return the same shapes and dtypes",
                   {param("pred", ParamKind::kTensor), param("operands", kList, {}, true)}, {"results"},
                   {"then", "else"}, "pred a bool scalar"));
  v.push_back(spec("map", "map(Tensor[] xs, Tensor[] args) -> Tensor[]",
                   "body(x..., *args) for each slice of xs along dim 0, results stacked",
                   {param("xs", kList), param("args", kList, {}, true)}, {"ys"}, {"body"}));
  v.push_back(spec(
      "scan", "scan(Tensor[] init, Tensor[] xs, *, int dim=0, bool reverse=False) -> (Tensor[] carry, Tensor[] ys)",
      "carry, y = body(carry..., x...) for each slice of xs along dim; the last carry and the stacked ys",
      {param("init", kList), param("xs", kList), param("dim", ParamKind::kInt, int64_t{0}, false, true),
       param("reverse", ParamKind::kBool, false, false, true)},
      {"carry", "ys"}, {"body"}));
  v.push_back(spec("while_loop", "while_loop(Tensor[] carried_inputs, *, int max_iters=1000000) -> Tensor[]",
                   "carries = body(*carries) while cond(*carries); past max_iters: deadline_exceeded",
                   {param("carried_inputs", kList), param("max_iters", ParamKind::kInt, int64_t{1000000}, false, true)},
                   {"carries"}, {"cond", "body"}));
  return v;
}

}  // namespace

const std::vector<ControlFlowOpSpec>& control_flow_op_specs() {
  static const std::vector<ControlFlowOpSpec> specs = make_specs();
  return specs;
}

}  // namespace tensord
