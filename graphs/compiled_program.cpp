#include "graphs/compiled_program.h"

#include <climits>
#include <cmath>
#include <queue>
#include <set>

#include "graphs/control_flow.h"
#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void invalid_program(const std::string& msg, const std::string& node = {}) {
  throw Error(ErrorCode::kInvalidProgram, msg, node);
}

// Value names: the same alphabet as tensor names, plus nothing fancy.
bool valid_value_name(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':'))
      return false;
  }
  return s[0] != '$';
}

class Compiler {
 public:
  Compiler(const Program& p, const std::map<std::string, TensorMeta>& input_metas, const StoredLookup& stored)
      : p_(p), input_metas_(input_metas), stored_(stored) {}

  CompiledProgram run() {
    declare_inputs();
    declare_node_outputs();
    bind_nodes();
    order_nodes();
    infer();
    plan();
    return std::move(out_);
  }

 private:
  int add_value(ValueInfo v) {
    out_.values.push_back(std::move(v));
    out_.constants.emplace_back();
    return static_cast<int>(out_.values.size()) - 1;
  }

  void declare_inputs() {
    std::set<std::string> seen;
    if (!p_.inputs.empty()) {
      for (const auto& in : p_.inputs) {
        if (!valid_value_name(in.name)) invalid_program("invalid input name '" + in.name + "'");
        if (!seen.insert(in.name).second) invalid_program("duplicate input name '" + in.name + "'");
        auto it = input_metas_.find(in.name);
        if (it == input_metas_.end()) {
          throw Error(ErrorCode::kBadRequest, "missing input '" + in.name + "'");
        }
        if (it->second.dtype != in.meta.dtype || ((it->second.mx || in.meta.mx) && it->second.str() != in.meta.str())) {
          throw Error(ErrorCode::kDtypeMismatch,
                      "input '" + in.name + "' is " + it->second.str() + ", the program declares " + in.meta.str());
        }
        if (!in.any_shape && it->second.shape != in.meta.shape) {
          throw Error(ErrorCode::kShapeMismatch,
                      "input '" + in.name + "' is " + it->second.str() + ", the program declares " + in.meta.str());
        }
        int id = add_value(ValueInfo{ValueInfo::Source::kInput, in.name, it->second});
        out_.inputs.emplace_back(in.name, id);
        out_.by_name[in.name] = id;
      }
      for (const auto& [name, meta] : input_metas_) {
        if (!seen.count(name)) throw Error(ErrorCode::kBadRequest, "input '" + name + "' is not a program input");
      }
    } else {
      for (const auto& [name, meta] : input_metas_) {
        if (!valid_value_name(name)) invalid_program("invalid input name '" + name + "'");
        int id = add_value(ValueInfo{ValueInfo::Source::kInput, name, meta});
        out_.inputs.emplace_back(name, id);
        out_.by_name[name] = id;
      }
    }
  }

  void declare_node_outputs() {
    std::set<std::string> ids;
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const Node& n = p_.nodes[i];
      if (n.id.empty() || n.id.size() > 256) invalid_program("node without a valid id");
      if (!ids.insert(n.id).second) invalid_program("duplicate node id '" + n.id + "'", n.id);
      for (const auto& o : n.outputs) {
        if (!valid_value_name(o)) invalid_program("invalid output name '" + o + "'", n.id);
        if (out_.by_name.count(o)) invalid_program("value '" + o + "' is defined twice", n.id);
        ValueInfo v{ValueInfo::Source::kNode, o, {}};
        v.producer = static_cast<int>(i);
        out_.by_name[o] = add_value(std::move(v));
      }
    }
  }

  // Resolves a value name (or "$stored/x") to a value id.
  int resolve(const std::string& name, const Node& n) {
    if (name.rfind(kStoredPrefix, 0) == 0) {
      std::string sname = name.substr(std::string(kStoredPrefix).size());
      auto it = stored_ids_.find(sname);
      if (it != stored_ids_.end()) return it->second;
      std::optional<Tensor> t = stored_ ? stored_(sname) : std::nullopt;
      if (!t) throw Error(ErrorCode::kNotFound, "stored tensor '" + sname + "' not found", n.id);
      int id = add_value(ValueInfo{ValueInfo::Source::kStored, sname, t->meta()});
      out_.constants[static_cast<size_t>(id)] = *t;
      stored_ids_[sname] = id;
      return id;
    }
    auto it = out_.by_name.find(name);
    if (it == out_.by_name.end()) invalid_program("node '" + n.id + "' references unknown value '" + name + "'", n.id);
    return it->second;
  }

  int constant(Tensor t) {
    int id = add_value(ValueInfo{ValueInfo::Source::kConstant, "", t.meta()});
    out_.constants[static_cast<size_t>(id)] = std::move(t);
    return id;
  }

  static Tensor wrapped_scalar(const Attr& a) {
    Tensor t;
    if (a.is_bool()) {
      t = Tensor::empty_host(DType::kBool, {});
      *t.data_ptr<bool>() = a.to_bool("scalar");
    } else if (a.is_int()) {
      t = Tensor::empty_host(DType::kInt64, {});
      *t.data_ptr<int64_t>() = a.to_int("scalar");
    } else {
      t = Tensor::empty_host(DType::kFloat64, {});
      *t.data_ptr<double>() = a.to_double("scalar");
    }
    t.set_wrapped_number(true);
    return t;
  }

  static std::string where(const OpDef& op, const ParamSpec& ps) { return op.name + ": argument '" + ps.name + "'"; }

  [[noreturn]] static void bad_arg(const OpDef& op, const ParamSpec& ps, const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, where(op, ps) + " " + why);
  }

  void bind_param(const Node& n, const OpDef& op, size_t pi, const ArgExpr& a, BoundNode& b) {
    const ParamSpec& ps = op.params[pi];
    using K = ArgExpr::Kind;
    if (a.kind == K::kNull) {
      if (!ps.optional && ps.default_value.is_none()) bad_arg(op, ps, "may not be null");
      b.attrs[pi] = Attr();
      return;
    }
    switch (ps.kind) {
      case ParamKind::kTensor:
      case ParamKind::kScalarOrTensor:
        if (a.kind == K::kString) {
          b.tensor_params[pi] = {resolve(a.str, n)};
          b.tensor_names[pi] = {a.str};
        } else if (a.kind == K::kTensor) {
          b.tensor_params[pi] = {constant(a.tensor)};
          b.tensor_names[pi] = {""};
        } else if (a.kind == K::kLiteral && ps.kind == ParamKind::kScalarOrTensor && a.literal.is_number()) {
          b.tensor_params[pi] = {constant(wrapped_scalar(a.literal))};
          b.tensor_names[pi] = {""};
        } else {
          bad_arg(op, ps, "expects a tensor (a value name, \"$stored/name\" or an inline tensor)");
        }
        return;
      case ParamKind::kTensorList:
        if (a.kind != K::kStringList) bad_arg(op, ps, "expects a list of value names");
        for (const auto& s : a.strs) {
          b.tensor_params[pi].push_back(resolve(s, n));
          b.tensor_names[pi].push_back(s);
        }
        return;
      case ParamKind::kInt:
        if (a.kind != K::kLiteral || !(a.literal.is_int() || a.literal.is_bool())) bad_arg(op, ps, "expects an int");
        b.attrs[pi] = a.literal;
        return;
      case ParamKind::kFloat:
        if (a.kind == K::kString) {
          if (a.str == "inf" || a.str == "+inf") {
            b.attrs[pi] = Attr(HUGE_VAL);
            return;
          }
          if (a.str == "-inf") {
            b.attrs[pi] = Attr(-HUGE_VAL);
            return;
          }
          if (a.str == "nan") {
            b.attrs[pi] = Attr(std::nan(""));
            return;
          }
          // Some float params also take a named mode (norm's p="fro"): pass it on.
          b.attrs[pi] = Attr(a.str);
          return;
        }
        if (a.kind != K::kLiteral || !a.literal.is_number()) bad_arg(op, ps, "expects a number");
        b.attrs[pi] = a.literal;
        return;
      case ParamKind::kBool:
        if (a.kind != K::kLiteral || !a.literal.is_bool()) bad_arg(op, ps, "expects a bool");
        b.attrs[pi] = a.literal;
        return;
      case ParamKind::kString:
        if (a.kind == K::kString) {
          b.attrs[pi] = Attr(a.str);
        } else if (a.kind == K::kLiteral) {
          b.attrs[pi] = a.literal;  // ops such as getitem also take ints
        } else if (a.kind == K::kStringList && a.strs.empty()) {
          b.attrs[pi] = Attr(std::vector<int64_t>{});
        } else {
          bad_arg(op, ps, "expects a string");
        }
        return;
      case ParamKind::kDType:
        if (a.kind != K::kString || !dtype_from_name(a.str)) bad_arg(op, ps, "expects a dtype name");
        b.attrs[pi] = Attr(a.str);
        return;
      case ParamKind::kIntList:
        if (a.kind == K::kStringList && a.strs.empty()) {
          b.attrs[pi] = Attr(std::vector<int64_t>{});
        } else if (a.kind == K::kLiteral && (a.literal.is_int_list() || a.literal.is_int())) {
          b.attrs[pi] = a.literal;
        } else {
          bad_arg(op, ps, "expects an int or a list of ints");
        }
        return;
      case ParamKind::kFloatList:
        if (a.kind == K::kStringList && a.strs.empty()) {
          b.attrs[pi] = Attr(std::vector<double>{});
        } else if (a.kind == K::kLiteral &&
                   (a.literal.is_double_list() || a.literal.is_int_list() || a.literal.is_number())) {
          b.attrs[pi] = Attr(a.literal.to_double_list(ps.name.c_str()));
        } else {
          bad_arg(op, ps, "expects a list of numbers");
        }
        return;
    }
  }

  // cond / while_loop / scan / map / associative_scan (graphs/control_flow.h):
  // operands now, subprograms at inference.
  void bind_control_flow(const Node& n) {
    BoundNode b;
    b.id = n.id;
    b.op = control_flow_op_def(n.op);
    std::vector<ArgExpr> operands;
    b.control = parse_control_flow(n, &operands);
    b.tensor_params.resize(1);
    b.tensor_names.resize(1);
    b.attrs.resize(1);
    for (const ArgExpr& a : operands) {
      b.tensor_params[0].push_back(a.kind == ArgExpr::Kind::kTensor ? constant(a.tensor) : resolve(a.str, n));
      b.tensor_names[0].push_back(a.kind == ArgExpr::Kind::kTensor ? std::string() : a.str);
    }
    for (const auto& o : n.outputs) b.outputs.push_back(out_.by_name.at(o));
    out_.nodes.push_back(std::move(b));
  }

  void bind_nodes() {
    const OpRegistry& reg = OpRegistry::global();
    out_.nodes.reserve(p_.nodes.size());
    for (const Node& n : p_.nodes) {
      if (is_control_flow_op(n.op)) {
        bind_control_flow(n);
        continue;
      }
      if (!n.subprograms.empty()) invalid_program("op '" + n.op + "' takes no subprograms", n.id);
      const OpDef* op = reg.find(n.op);
      if (!op) {
        std::string msg = "unknown op '" + (n.op.size() > 64 ? n.op.substr(0, 64) + "..." : n.op) + "'";
        auto close = reg.close_names(n.op);
        if (!close.empty()) {
          msg += "; did you mean ";
          for (size_t i = 0; i < close.size(); ++i) msg += (i ? ", " : "") + ("'" + close[i] + "'");
          msg += "?";
        }
        throw Error(ErrorCode::kUnknownOp, msg, n.id);
      }
      BoundNode b;
      b.id = n.id;
      b.op = op;
      b.tensor_params.resize(op->params.size());
      b.tensor_names.resize(op->params.size());
      b.attrs.resize(op->params.size());
      std::vector<bool> given(op->params.size(), false);
      try {
        size_t positional = 0;
        for (const ArgExpr& a : n.args) {
          while (positional < op->params.size() && op->params[positional].kwarg_only) ++positional;
          if (positional >= op->params.size()) {
            throw Error(ErrorCode::kInvalidArgument,
                        op->name + ": too many positional arguments (" + std::to_string(n.args.size()) + ")");
          }
          bind_param(n, *op, positional, a, b);
          given[positional++] = true;
        }
        for (const auto& [k, a] : n.kwargs) {
          int pi = op->param_index(k);
          if (pi < 0) throw Error(ErrorCode::kInvalidArgument, op->name + ": unexpected keyword argument '" + k + "'");
          if (given[static_cast<size_t>(pi)]) {
            throw Error(ErrorCode::kInvalidArgument, op->name + ": got multiple values for argument '" + k + "'");
          }
          bind_param(n, *op, static_cast<size_t>(pi), a, b);
          given[static_cast<size_t>(pi)] = true;
        }
        for (size_t i = 0; i < op->params.size(); ++i) {
          if (given[i]) continue;
          const ParamSpec& ps = op->params[i];
          if (!ps.default_value.is_none()) {
            b.attrs[i] = ps.default_value;
          } else if (!ps.optional) {
            throw Error(ErrorCode::kInvalidArgument, op->name + ": missing required argument '" + ps.name + "'");
          }
        }
        if (n.outputs.size() > std::max<size_t>(op->outputs.size(), 1)) {
          throw Error(ErrorCode::kInvalidArgument, op->name + " returns " + std::to_string(op->outputs.size()) +
                                                       " values, node lists " + std::to_string(n.outputs.size()));
        }
      } catch (const Error& e) {
        throw e.with_node(n.id);
      }
      if (op->mutates >= 0) {
        const auto& target =
            n.args.size() > static_cast<size_t>(op->mutates) ? n.args[static_cast<size_t>(op->mutates)] : ArgExpr{};
        if (target.kind == ArgExpr::Kind::kString && target.str.rfind(kStoredPrefix, 0) == 0) {
          b.writes_stored = target.str.substr(std::string(kStoredPrefix).size());
          for (const auto& other : out_.nodes) {
            if (other.writes_stored == b.writes_stored) {
              invalid_program("stored tensor '" + b.writes_stored + "' is written by two nodes", n.id);
            }
          }
        }
      }
      for (const auto& o : n.outputs) b.outputs.push_back(out_.by_name.at(o));
      out_.nodes.push_back(std::move(b));
    }
  }

  // Kahn's algorithm, stable in the given order; a leftover node is a cycle.
  void order_nodes() {
    size_t n = out_.nodes.size();
    std::vector<std::vector<size_t>> users(n);
    std::vector<size_t> indeg(n, 0);
    for (size_t i = 0; i < n; ++i) {
      std::set<int> deps;
      for (const auto& ids : out_.nodes[i].tensor_params) {
        for (int v : ids) {
          const ValueInfo& vi = out_.values[static_cast<size_t>(v)];
          if (vi.source == ValueInfo::Source::kNode) deps.insert(vi.producer);
        }
      }
      for (int d : deps) {
        if (static_cast<size_t>(d) == i)
          invalid_program("node '" + out_.nodes[i].id + "' uses its own output", out_.nodes[i].id);
        users[static_cast<size_t>(d)].push_back(i);
        ++indeg[i];
      }
    }
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
    for (size_t i = 0; i < n; ++i) {
      if (indeg[i] == 0) ready.push(i);
    }
    std::vector<size_t> order;
    while (!ready.empty()) {
      size_t i = ready.top();
      ready.pop();
      order.push_back(i);
      for (size_t u : users[i]) {
        if (--indeg[u] == 0) ready.push(u);
      }
    }
    if (order.size() != n) {
      for (size_t i = 0; i < n; ++i) {
        if (indeg[i] != 0)
          invalid_program("the program has a cycle through node '" + out_.nodes[i].id + "'", out_.nodes[i].id);
      }
    }
    std::vector<BoundNode> sorted;
    std::vector<int> new_index(n);
    for (size_t k = 0; k < n; ++k) new_index[order[k]] = static_cast<int>(k);
    for (size_t k = 0; k < n; ++k) sorted.push_back(std::move(out_.nodes[order[k]]));
    out_.nodes = std::move(sorted);
    for (auto& v : out_.values) {
      if (v.source == ValueInfo::Source::kNode) v.producer = new_index[static_cast<size_t>(v.producer)];
    }
  }

  // Only ops that say so read MX tensors (OpDef::takes_mx): any other kernel
  // would see the packed bytes as a uint8 tensor of the logical shape.
  static void refuse_mx_operands(const BoundNode& b, const OpArgs<TensorMeta>& args) {
    if (b.op->takes_mx && !b.control) return;
    for (const auto& list : args.tensors) {
      for (const auto& m : list) {
        if (!m.mx) continue;
        throw Error(
            ErrorCode::kDtypeMismatch,
            b.op->name + " does not take MX tensors (got " + m.str() + "); mx.dequantize(q) gives its float32 values",
            b.id);
      }
    }
  }

  void infer() {
    for (auto& b : out_.nodes) {
      OpArgs<TensorMeta> args = bind_node_args<TensorMeta>(b, [this](size_t v) { return out_.values[v].meta; });
      std::vector<TensorMeta> res;
      refuse_mx_operands(b, args);
      try {
        res = b.control ? infer_control_flow(b, args.tensors[0], stored_) : b.op->infer(args);
      } catch (const Error& e) {
        throw e.with_node(b.id);
      }
      if (b.control) {
        for (const auto& m : res) {
          if (m.mx) {
            throw Error(ErrorCode::kDtypeMismatch,
                        b.op->name + ": control flow does not carry MX tensors (a body returns " + m.str() + ")", b.id);
          }
        }
      }
      if (res.size() < b.outputs.size()) {
        throw Error(ErrorCode::kInvalidArgument,
                    b.op->name + " returns " + std::to_string(res.size()) + " values, node lists " +
                        std::to_string(b.outputs.size()),
                    b.id);
      }
      if (!b.writes_stored.empty()) {
        const auto& cur = out_.values[static_cast<size_t>(b.tensor_params[static_cast<size_t>(b.op->mutates)][0])].meta;
        if (res.empty() || res[0].dtype != cur.dtype || res[0].shape != cur.shape) {
          throw Error(ErrorCode::kInternal, b.op->name + ": in-place result does not match its target", b.id);
        }
      }
      for (size_t k = 0; k < b.outputs.size(); ++k) {
        res[k].wrapped_number = false;
        shape_numel(res[k].shape);  // overflow guard
        out_.values[static_cast<size_t>(b.outputs[k])].meta = res[k];
      }
    }
    for (const auto& o : p_.outputs) {
      auto it = out_.by_name.find(o);
      if (it == out_.by_name.end()) invalid_program("program output '" + o + "' is not defined");
      // A value may be listed more than once (API.md 4): a scan body returns
      // its new carry as its y too. Outputs are positional for bodies; a
      // top-level program's response names each value once.
      out_.outputs.emplace_back(o, it->second);
    }
  }

  void plan() {
    for (size_t i = 0; i < out_.nodes.size(); ++i) {
      for (const auto& ids : out_.nodes[i].tensor_params) {
        for (int v : ids) out_.values[static_cast<size_t>(v)].last_use = static_cast<int>(i);
      }
    }
    for (const auto& [name, id] : out_.outputs) out_.values[static_cast<size_t>(id)].last_use = INT_MAX;
    // Bytes live after each node: values produced so far whose last use is later.
    int64_t live = 0, peak = 0;
    std::vector<std::vector<int>> dies(out_.nodes.size() + 1);
    for (size_t i = 0; i < out_.nodes.size(); ++i) {
      for (int v : out_.nodes[i].outputs) {
        const auto& vi = out_.values[static_cast<size_t>(v)];
        live += static_cast<int64_t>(vi.meta.nbytes());
        if (vi.last_use >= 0 && vi.last_use != INT_MAX) dies[static_cast<size_t>(vi.last_use)].push_back(v);
        if (vi.last_use < 0) dies[i].push_back(v);  // unused: dropped right away
      }
      peak = std::max(peak, live);
      for (int v : dies[i]) live -= static_cast<int64_t>(out_.values[static_cast<size_t>(v)].meta.nbytes());
    }
    out_.peak_bytes = peak;
  }

  const Program& p_;
  const std::map<std::string, TensorMeta>& input_metas_;
  const StoredLookup& stored_;
  std::map<std::string, int> stored_ids_;
  CompiledProgram out_;
};

}  // namespace

CompiledProgram compile_program(const Program& p, const std::map<std::string, TensorMeta>& input_metas,
                                const StoredLookup& stored) {
  if (p.nodes.size() > 100000) throw Error(ErrorCode::kInvalidProgram, "program has too many nodes (max 100000)");
  return Compiler(p, input_metas, stored).run();
}

std::vector<TensorMeta> output_metas(const CompiledProgram& cp) {
  std::vector<TensorMeta> out;
  out.reserve(cp.outputs.size());
  for (const auto& [name, id] : cp.outputs) out.push_back(cp.values[static_cast<size_t>(id)].meta);
  return out;
}

OpArgs<TensorMeta> node_metas(const BoundNode& b, const CompiledProgram& cp) {
  return bind_node_args<TensorMeta>(b, [&cp](size_t v) { return cp.values[v].meta; });
}

bool kernel_takes(const BoundNode& b, const CompiledProgram& cp, std::string_view backend) {
  if (!b.op->kernels.count(backend)) return false;
  auto acc = b.op->accepts.find(backend);
  return acc == b.op->accepts.end() || acc->second(node_metas(b, cp));
}

}  // namespace tensord
