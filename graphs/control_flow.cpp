// The compile half of control flow (graphs/control_flow.h): parsing a
// node's operands and keywords, and compiling its subprograms against the
// operands' metas with the signature checks. graphs/control_flow_run.cpp
// runs what this builds.
#include "graphs/control_flow.h"

#include "graphs/scan_batching.h"
#include "ops/error.h"

namespace tensord {
namespace {

const char* kind_name(ControlKind k) {
  switch (k) {
    case ControlKind::kCond:
      return "cond";
    case ControlKind::kWhileLoop:
      return "while_loop";
    case ControlKind::kScan:
      return "scan";
    case ControlKind::kMap:
      return "map";
    case ControlKind::kAssociativeScan:
      return "associative_scan";
  }
  return "?";
}

[[noreturn]] void invalid_program(const std::string& msg, const std::string& node) {
  throw Error(ErrorCode::kInvalidProgram, msg, node);
}
[[noreturn]] void invalid_argument(const std::string& msg, const std::string& node) {
  throw Error(ErrorCode::kInvalidArgument, msg, node);
}

std::string metas_str(const std::vector<TensorMeta>& ms) {
  std::string s = "(";
  for (size_t i = 0; i < ms.size(); ++i) s += (i ? ", " : "") + ms[i].str();
  return s + ")";
}

bool same_meta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}

bool same_metas(const std::vector<TensorMeta>& a, const std::vector<TensorMeta>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_meta(a[i], b[i])) return false;
  }
  return true;
}

bool is_bool_scalar(const TensorMeta& m) {
  return m.dtype == DType::kBool && m.numel() == 1;
}

// Appends the operands one arg stands for: a value name, a list of value
// names, or an inline tensor.
size_t flatten_arg(const ArgExpr& a, const std::string& op, const std::string& node, std::vector<ArgExpr>* out) {
  using K = ArgExpr::Kind;
  if (a.kind == K::kString || a.kind == K::kTensor) {
    out->push_back(a);
    return 1;
  }
  if (a.kind == K::kStringList) {
    for (const auto& s : a.strs) {
      ArgExpr e;
      e.kind = K::kString;
      e.str = s;
      out->push_back(std::move(e));
    }
    return a.strs.size();
  }
  invalid_argument(op + ": operands must be value names, lists of value names or inline tensors", node);
}

std::shared_ptr<const CompiledProgram> compile_body(const ControlFlow& cf, const std::string& key,
                                                    const std::vector<TensorMeta>& metas, const std::string& node,
                                                    const StoredLookup& stored) {
  const Program& p = *cf.programs.at(key);
  const std::string w = control_flow_label(cf, node) + ": subprogram \"" + key + "\"";
  if (p.inputs.size() != metas.size()) {
    invalid_program(w + " declares " + std::to_string(p.inputs.size()) + " inputs, the node passes " +
                        std::to_string(metas.size()) + " " + metas_str(metas),
                    node);
  }
  std::map<std::string, TensorMeta> im;
  for (size_t k = 0; k < metas.size(); ++k) {
    const bool ok =
        p.inputs[k].any_shape ? p.inputs[k].meta.dtype == metas[k].dtype : same_meta(p.inputs[k].meta, metas[k]);
    if (!ok) {
      invalid_program(w + " input " + std::to_string(k) + " '" + p.inputs[k].name + "' is declared " +
                          p.inputs[k].meta.str() + " but receives " + metas[k].str(),
                      node);
    }
    TensorMeta m = metas[k];
    m.wrapped_number = false;
    im[p.inputs[k].name] = m;
  }
  try {
    return std::make_shared<const CompiledProgram>(compile_program(p, im, stored));
  } catch (const Error& e) {
    throw Error(e.code(), w + ": " + e.message(), e.node().empty() ? node : e.node());
  }
}

int64_t normalize_dim(int64_t dim, int64_t rank, const std::string& what, const std::string& node) {
  if (rank == 0) invalid_argument(what + ": a scanned operand must have at least one dimension", node);
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) {
    invalid_argument(
        what + ": dim " + std::to_string(dim) + " is out of range for " + std::to_string(rank) + " dimensions", node);
  }
  return d;
}

TensorMeta remove_dim(TensorMeta m, int64_t dim) {
  m.shape.erase(m.shape.begin() + dim);
  m.wrapped_number = false;
  return m;
}

TensorMeta insert_dim(TensorMeta m, int64_t dim, int64_t n) {
  m.shape.insert(m.shape.begin() + dim, n);
  m.wrapped_number = false;
  return m;
}

}  // namespace

std::string control_flow_label(const ControlFlow& cf, const std::string& node) {
  return std::string(kind_name(cf.kind)) + " '" + node + "'";
}

bool is_control_flow_op(const std::string& op) {
  return op == "cond" || op == "while_loop" || op == "scan" || op == "map" || op == "associative_scan";
}

const OpDef* control_flow_op_def(const std::string& op) {
  static const std::map<std::string, OpDef> defs = [] {
    std::map<std::string, OpDef> m;
    for (const char* n : {"cond", "while_loop", "scan", "map", "associative_scan"}) {
      OpDef d;
      d.name = n;
      d.doc = "control flow (API.md 4.2)";
      ParamSpec ps;
      ps.name = "operands";
      ps.kind = ParamKind::kTensorList;
      d.params.push_back(ps);
      d.dtypes = dtypes_all();
      m.emplace(n, std::move(d));
    }
    return m;
  }();
  auto it = defs.find(op);
  return it == defs.end() ? nullptr : &it->second;
}

std::shared_ptr<const ControlFlow> parse_control_flow(const Node& n, std::vector<ArgExpr>* operands) {
  auto cf = std::make_shared<ControlFlow>();
  std::vector<std::string> keys;
  if (n.op == "cond") {
    cf->kind = ControlKind::kCond;
    keys = {"then", "else"};
  } else if (n.op == "while_loop") {
    cf->kind = ControlKind::kWhileLoop;
    keys = {"cond", "body"};
  } else if (n.op == "scan") {
    cf->kind = ControlKind::kScan;
    keys = {"body"};
  } else if (n.op == "map") {
    cf->kind = ControlKind::kMap;
    keys = {"body"};
  } else if (n.op == "associative_scan") {
    cf->kind = ControlKind::kAssociativeScan;
    keys = {"combine_fn"};
  } else {
    throw Error(ErrorCode::kInternal, "not a control-flow op: " + n.op, n.id);
  }
  const std::string w = control_flow_label(*cf, n.id);
  for (const auto& k : keys) {
    auto it = n.subprograms.find(k);
    if (it == n.subprograms.end() || !it->second) invalid_program(w + " needs a \"" + k + "\" subprogram", n.id);
    if (it->second->inputs.empty() && cf->kind != ControlKind::kCond) {
      invalid_program(w + ": subprogram \"" + k + "\" must declare its inputs", n.id);
    }
    cf->programs[k] = it->second;
  }
  for (const auto& [k, p] : n.subprograms) {
    if (!cf->programs.count(k)) invalid_program(w + " takes no \"" + k + "\" subprogram", n.id);
  }

  // Operands.
  switch (cf->kind) {
    case ControlKind::kCond: {
      if (n.args.empty()) invalid_argument(w + ": missing the predicate", n.id);
      if (n.args[0].kind == ArgExpr::Kind::kStringList) invalid_argument(w + ": pred must be one bool tensor", n.id);
      for (const auto& a : n.args) flatten_arg(a, w, n.id, operands);
      break;
    }
    case ControlKind::kWhileLoop:
      for (const auto& a : n.args) flatten_arg(a, w, n.id, operands);
      if (operands->empty()) invalid_argument(w + ": needs at least one carried value", n.id);
      break;
    case ControlKind::kScan:
      if (n.args.size() != 2) invalid_argument(w + ": expects two args, init and xs (names or lists of names)", n.id);
      cf->n_carry = flatten_arg(n.args[0], w, n.id, operands);
      cf->n_sliced = flatten_arg(n.args[1], w, n.id, operands);
      break;
    case ControlKind::kMap:
      if (n.args.empty()) invalid_argument(w + ": missing xs", n.id);
      cf->n_sliced = flatten_arg(n.args[0], w, n.id, operands);
      for (size_t i = 1; i < n.args.size(); ++i) flatten_arg(n.args[i], w, n.id, operands);
      break;
    case ControlKind::kAssociativeScan:
      if (n.args.size() != 1) invalid_argument(w + ": expects one arg, xs (a name or a list of names)", n.id);
      cf->n_sliced = flatten_arg(n.args[0], w, n.id, operands);
      break;
  }
  if ((cf->kind == ControlKind::kScan || cf->kind == ControlKind::kMap || cf->kind == ControlKind::kAssociativeScan) &&
      cf->n_sliced == 0) {
    invalid_argument(w + ": xs may not be empty", n.id);
  }

  // Kwargs.
  for (const auto& [k, a] : n.kwargs) {
    const bool lit = a.kind == ArgExpr::Kind::kLiteral;
    const bool scan_like = cf->kind == ControlKind::kScan || cf->kind == ControlKind::kAssociativeScan;
    if (k == "dim" && scan_like) {
      if (!lit || !a.literal.is_int()) invalid_argument(w + ": dim must be an int", n.id);
      cf->dim = a.literal.to_int("dim");
    } else if (k == "reverse" && scan_like) {
      if (!lit || !a.literal.is_bool()) invalid_argument(w + ": reverse must be a bool", n.id);
      cf->reverse = a.literal.to_bool("reverse");
    } else if (k == "combine_mode" && cf->kind == ControlKind::kAssociativeScan) {
      if (a.kind != ArgExpr::Kind::kString || (a.str != "generic" && a.str != "pointwise")) {
        invalid_argument(w + ": combine_mode must be \"generic\" or \"pointwise\"", n.id);
      }
    } else if (k == "max_iters" && cf->kind == ControlKind::kWhileLoop) {
      if (!lit || !a.literal.is_int() || a.literal.to_int("max_iters") < 0) {
        invalid_argument(w + ": max_iters must be a non-negative int", n.id);
      }
      cf->max_iters = a.literal.to_int("max_iters");
    } else {
      invalid_argument(w + ": unexpected keyword argument '" + k + "'", n.id);
    }
  }
  return cf;
}

std::vector<TensorMeta> infer_control_flow(BoundNode& b, const std::vector<TensorMeta>& ops,
                                           const StoredLookup& stored) {
  auto cf = std::make_shared<ControlFlow>(*b.control);
  const std::string& node = b.id;
  const std::string w = control_flow_label(*cf, node);
  std::vector<TensorMeta> res;
  switch (cf->kind) {
    case ControlKind::kCond: {
      if (!is_bool_scalar(ops[0])) {
        invalid_argument(w + ": pred must be a bool scalar tensor, got " + ops[0].str(), node);
      }
      std::vector<TensorMeta> args(ops.begin() + 1, ops.end());
      cf->bodies["then"] = compile_body(*cf, "then", args, node, stored);
      cf->bodies["else"] = compile_body(*cf, "else", args, node, stored);
      auto t = output_metas(*cf->bodies["then"]);
      auto e = output_metas(*cf->bodies["else"]);
      if (!same_metas(t, e)) {
        invalid_program(w + ": then and else must return the same shapes and dtypes: then returns " + metas_str(t) +
                            ", else returns " + metas_str(e),
                        node);
      }
      res = t;
      break;
    }
    case ControlKind::kWhileLoop: {
      cf->bodies["cond"] = compile_body(*cf, "cond", ops, node, stored);
      cf->bodies["body"] = compile_body(*cf, "body", ops, node, stored);
      auto c = output_metas(*cf->bodies["cond"]);
      if (c.size() != 1 || !is_bool_scalar(c[0])) {
        invalid_program(w + ": cond must return one bool scalar, returns " + metas_str(c), node);
      }
      auto o = output_metas(*cf->bodies["body"]);
      std::vector<TensorMeta> carries(ops);
      for (auto& m : carries) m.wrapped_number = false;
      if (!same_metas(o, carries)) {
        invalid_program(
            w + ": body must return the carries' shapes and dtypes " + metas_str(carries) + ", returns " + metas_str(o),
            node);
      }
      res = carries;
      break;
    }
    case ControlKind::kScan:
    case ControlKind::kMap:
    case ControlKind::kAssociativeScan: {
      const size_t first = cf->kind == ControlKind::kScan ? cf->n_carry : 0;
      const TensorMeta& x0 = ops[first];
      cf->dim = cf->kind == ControlKind::kMap ? normalize_dim(0, x0.dim(), w, node)
                                              : normalize_dim(cf->dim, x0.dim(), w, node);
      cf->length = x0.shape[static_cast<size_t>(cf->dim)];
      std::vector<TensorMeta> slices;
      for (size_t k = first; k < first + cf->n_sliced; ++k) {
        if (ops[k].dim() != x0.dim() || ops[k].shape[static_cast<size_t>(cf->dim)] != cf->length) {
          throw Error(ErrorCode::kShapeMismatch,
                      w + ": every xs must have the same size along dim " + std::to_string(cf->dim) + ": " + x0.str() +
                          " and " + ops[k].str(),
                      node);
        }
        slices.push_back(remove_dim(ops[k], cf->dim));
      }
      if (cf->kind == ControlKind::kAssociativeScan) {
        std::vector<TensorMeta> args(slices);
        args.insert(args.end(), slices.begin(), slices.end());
        cf->bodies["combine_fn"] = compile_body(*cf, "combine_fn", args, node, stored);
        auto o = output_metas(*cf->bodies["combine_fn"]);
        if (!same_metas(o, slices)) {
          invalid_program(w + ": combine_fn must return " + metas_str(slices) + ", returns " + metas_str(o), node);
        }
        cf->batching = plan_scan_batching(*cf);
        for (size_t k = 0; k < cf->n_sliced; ++k) {
          TensorMeta m = ops[k];
          m.wrapped_number = false;
          res.push_back(m);
        }
        break;
      }
      std::vector<TensorMeta> args;
      size_t n_ys_from = 0;
      if (cf->kind == ControlKind::kScan) {
        args.assign(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(cf->n_carry));
        for (auto& m : args) m.wrapped_number = false;
        args.insert(args.end(), slices.begin(), slices.end());
        n_ys_from = cf->n_carry;
      } else {
        args = slices;
        args.insert(args.end(), ops.begin() + static_cast<std::ptrdiff_t>(cf->n_sliced), ops.end());
      }
      cf->bodies["body"] = compile_body(*cf, "body", args, node, stored);
      auto o = output_metas(*cf->bodies["body"]);
      if (cf->kind == ControlKind::kScan) {
        std::vector<TensorMeta> carries(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(cf->n_carry));
        std::vector<TensorMeta> got(o.begin(),
                                    o.begin() + static_cast<std::ptrdiff_t>(std::min(o.size(), cf->n_carry)));
        if (!same_metas(got, carries)) {
          invalid_program(
              w + ": body must return the carries " + metas_str(carries) + " first, returns " + metas_str(o), node);
        }
        res = carries;
      }
      for (size_t k = n_ys_from; k < o.size(); ++k) {
        if (cf->dim > o[k].dim()) {
          invalid_program(w + ": body output " + std::to_string(k) + " " + o[k].str() +
                              " cannot be stacked along dim " + std::to_string(cf->dim),
                          node);
        }
        res.push_back(insert_dim(o[k], cf->dim, cf->length));
      }
      break;
    }
  }
  b.control = cf;
  return res;
}
}  // namespace tensord
