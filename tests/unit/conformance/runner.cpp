#include "tests/unit/conformance/runner.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "ops/convert.h"
#include "ops/error.h"

namespace tensord::conformance {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The job's stored tensors for one call: reads see earlier writes.
class MapStored final : public StoredIO {
 public:
  explicit MapStored(std::map<std::string, Tensor> m) : m_(std::move(m)) {}
  std::optional<Tensor> read(const std::string& name) const override {
    auto it = m_.find(name);
    if (it == m_.end()) return std::nullopt;
    return it->second;
  }
  void write(const std::string& name, Tensor t) override { m_[name] = std::move(t); }
  std::map<std::string, Tensor>& map() { return m_; }

 private:
  std::map<std::string, Tensor> m_;
};

std::map<std::string, Tensor> host_copies(const std::map<std::string, Tensor>& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [n, t] : m) out[n] = t.to_host().clone_host();
  return out;
}

Tensor copy_host(const Tensor& t) {
  Tensor c = t.clone_host();
  c.set_wrapped_number(t.meta().wrapped_number);
  return c;
}

}  // namespace

OpArgs<Tensor> bind(const OpDef& op, const Call& c) {
  OpArgs<Tensor> a;
  a.op = &op;
  a.node = "conformance";
  const size_t np = op.params.size();
  a.tensors.resize(np);
  a.attrs.resize(np);
  a.names.resize(np);
  for (size_t i = 0; i < np; ++i) a.attrs[i] = op.params[i].default_value;
  for (const auto& [name, v] : c.args) {
    const int i = op.param_index(name);
    if (i < 0) throw std::invalid_argument(op.name + " has no param '" + name + "'");
    const auto k = static_cast<size_t>(i);
    if (const auto* t = std::get_if<Tensor>(&v)) {
      a.tensors[k] = {*t};
      a.names[k] = {""};
      a.attrs[k] = Attr();
    } else if (const auto* l = std::get_if<TensorList>(&v)) {
      a.tensors[k] = l->tensors;
      a.names[k] = l->names;
      a.names[k].resize(l->tensors.size());
      a.attrs[k] = Attr();
    } else {
      a.attrs[k] = std::get<Attr>(v);
    }
  }
  return a;
}

OpArgs<TensorMeta> metas_of(const OpArgs<Tensor>& a) {
  OpArgs<TensorMeta> m;
  m.op = a.op;
  m.node = a.node;
  m.attrs = a.attrs;
  m.names = a.names;
  m.tensors.resize(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    for (const auto& t : a.tensors[i]) m.tensors[i].push_back(t.meta());
  }
  return m;
}

std::vector<Planned> plan(const OpDef& op, const OpCases& cases, std::vector<std::string>* rejected) {
  std::vector<Planned> out;
  for (const Variant& v : cases.variants) {
    for (DType d : cases.dtypes) {
      if (!v.only.empty() && !v.only.count(d)) continue;
      const std::string key = op.name + "/" + v.name + "/" + std::string(dtype_name(d));
      Rng rng(fnv1a(key));
      Planned p;
      p.variant = &v;
      p.dtype = d;
      try {
        p.call = v.make(d, rng);
        p.metas = op.infer(metas_of(bind(op, p.call)));
      } catch (const Error& e) {
        if (rejected) rejected->push_back(key + ": " + e.message());
        continue;
      } catch (const std::exception& e) {
        if (rejected) rejected->push_back(key + ": " + e.what());
        continue;
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::string check_accepted_dtypes(const OpDef& op, const OpCases& cases) {
  if (cases.variants.empty()) return op.name + ": no variants";
  const Variant& v = cases.variants.front();
  std::string problems;
  for (DType d : all_dtypes()) {
    Rng rng(fnv1a(op.name + "/dtype-check/" + std::string(dtype_name(d))));
    std::string why;
    try {
      op.infer(metas_of(bind(op, v.make(d, rng))));
    } catch (const Error& e) {
      why = e.message();
    } catch (const std::exception& e) {
      why = e.what();
    }
    const bool accepted = why.empty();
    const bool listed = cases.dtypes.count(d) > 0;
    if (accepted && !listed) {
      problems += "\n  " + std::string(dtype_name(d)) + ": accepted by shape inference, not listed in the case table";
    } else if (!accepted && listed) {
      problems += "\n  " + std::string(dtype_name(d)) + ": listed in the case table, refused: " + why;
    }
  }
  return problems.empty() ? "" : op.name + " (variant '" + v.name + "'):" + problems;
}

bool backend_accepts(const OpDef& op, const std::string& backend, const Planned& p) {
  auto it = op.accepts.find(backend);
  if (it == op.accepts.end()) return true;
  return it->second(metas_of(bind(op, p.call)));
}

Call deep_copy(const Call& c) {
  Call out;
  out.steps = c.steps;
  for (const auto& [n, v] : c.args) {
    if (const auto* t = std::get_if<Tensor>(&v)) {
      out.arg(n, copy_host(*t));
    } else if (const auto* l = std::get_if<TensorList>(&v)) {
      TensorList copy{{}, l->names};
      for (const auto& t : l->tensors) copy.tensors.push_back(copy_host(t));
      out.arg(n, std::move(copy));
    } else {
      out.arg(n, v);
    }
  }
  out.stored = host_copies(c.stored);
  return out;
}

Outcome run_cpu(const OpDef& op, const Call& call, Backend& cpu, ThreadPool* pool) {
  const KernelFn& k = op.kernels.at("cpu");
  OpArgs<Tensor> args = bind(op, call);
  MapStored stored(host_copies(call.stored));
  OpContext ctx;
  ctx.backend = &cpu;
  ctx.device = Device{};
  ctx.pool = pool;
  ctx.stored = &stored;
  Outcome o;
  for (int s = 0; s < call.steps; ++s) o.outs = k(ctx, args);
  for (auto& t : o.outs) t = copy_host(t);  // a view of an operand is not the operand
  o.stored = host_copies(stored.map());
  return o;
}

Outcome run_device(const OpDef& op, const Call& call, Backend& backend) {
  const KernelFn& k = op.kernels.at(std::string(backend.name()));
  const Device dev = backend.devices().at(0).device;
  OpArgs<Tensor> args = bind(op, call);
  for (auto& list : args.tensors) {
    for (auto& t : list) {
      if (t.meta().wrapped_number && t.on_host()) continue;  // a launch argument, as placement leaves it
      t = t.to_device(&backend, dev, nullptr);
    }
  }
  // Stored tensors start in host memory (uploaded, never updated on the
  // device): the kernel moves what it reads.
  MapStored stored(host_copies(call.stored));
  OpContext ctx;
  ctx.backend = &backend;
  ctx.device = dev;
  ctx.stream = backend.create_stream(dev);
  ctx.stored = &stored;
  Outcome o;
  try {
    for (int s = 0; s < call.steps; ++s) {
      o.outs = k(ctx, args);
      backend.synchronize(ctx.stream);
    }
  } catch (...) {
    backend.destroy_stream(ctx.stream);
    throw;
  }
  backend.destroy_stream(ctx.stream);
  for (auto& t : o.outs) t = copy_host(t.to_host());
  o.stored = host_copies(stored.map());
  return o;
}

std::string check_metas(const std::vector<Tensor>& outs, const std::vector<TensorMeta>& metas) {
  if (outs.size() != metas.size()) {
    return "the kernel returned " + std::to_string(outs.size()) + " outputs, shape inference " +
           std::to_string(metas.size());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].dtype() != metas[i].dtype || outs[i].shape() != metas[i].shape) {
      return "output " + std::to_string(i) + " is " + outs[i].meta().str() + ", shape inference said " + metas[i].str();
    }
  }
  return "";
}

namespace {

// The bounds of Tolerance for one dtype.
struct Bounds {
  double rtol = 0;
  double atol = 0;
  bool ratio = false;  // float8_e8m0fnu: within a factor of two
};

Bounds bounds(DType d, const Tolerance& t) {
  const double eps = dtype_epsilon(d);
  switch (d) {
    case DType::kFloat16:
      return {t.narrow_ulps * eps, t.ulps * std::ldexp(1.0, -23) + std::ldexp(1.0, -24)};
    case DType::kBFloat16:
      return {t.narrow_ulps * eps, t.ulps * std::ldexp(1.0, -23) + std::ldexp(1.0, -133)};
    case DType::kFloat8E4M3FN:
      return {t.narrow_ulps * eps, t.ulps * std::ldexp(1.0, -23) + std::ldexp(1.0, -9)};
    case DType::kFloat8E5M2:
      return {t.narrow_ulps * eps, t.ulps * std::ldexp(1.0, -23) + std::ldexp(1.0, -16)};
    case DType::kFloat8E8M0FNU:
      return {0, 0, true};
    default:
      return {t.ulps * eps, t.ulps * eps};
  }
}

bool close(double g, double w, const Bounds& b) {
  if (std::isnan(w)) return std::isnan(g);
  if (std::isinf(w)) return g == w;
  if (b.ratio) return g == w || (g > 0 && w > 0 && g <= 2 * w && w <= 2 * g);
  return std::abs(g - w) <= b.rtol * std::abs(w) + b.atol;
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

}  // namespace

std::string compare(const Tensor& got, const Tensor& want, const Tolerance& t) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return "got " + got.meta().str() + ", want " + want.meta().str();
  }
  const DType d = got.dtype();
  const Bounds tol = bounds(d, t);
  const size_t esz = dtype_size(d);
  std::string bad;
  int nbad = 0;
  // Element i of t as text (only for mismatches: formatting is slow).
  auto text = [d](const Tensor& t, int64_t i) {
    if (d == DType::kBool) return std::string(static_cast<const uint8_t*>(t.data())[i] ? "true" : "false");
    if (!is_complex(d)) return fmt(load_as_double(d, t.data(), i));
    const auto z = load_as_complex(d, t.data(), i);
    return "(" + fmt(z.real()) + "," + fmt(z.imag()) + ")";
  };
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok = true;
    if (d == DType::kBool) {
      ok = (static_cast<const uint8_t*>(got.data())[i] != 0) == (static_cast<const uint8_t*>(want.data())[i] != 0);
    } else if (is_integral(d, false)) {
      ok = std::memcmp(static_cast<const char*>(got.data()) + i * esz, static_cast<const char*>(want.data()) + i * esz,
                       esz) == 0;
    } else if (is_complex(d)) {
      const auto a = load_as_complex(d, got.data(), i), b = load_as_complex(d, want.data(), i);
      ok = close(a.real(), b.real(), tol) && close(a.imag(), b.imag(), tol);
    } else {
      ok = close(load_as_double(d, got.data(), i), load_as_double(d, want.data(), i), tol);
    }
    if (!ok && ++nbad <= 4) bad += " [" + std::to_string(i) + "] got " + text(got, i) + " want " + text(want, i) + ";";
  }
  if (!nbad) return "";
  return std::to_string(nbad) + " of " + std::to_string(got.numel()) + " elements of " + got.meta().str() +
         " differ (tolerance " +
         (tol.ratio ? std::string("a factor of 2") : fmt(tol.rtol) + " * |want| + " + fmt(tol.atol)) + "):" + bad;
}

std::string compare(const Outcome& got, const Outcome& want, const Tolerance& tol, const std::vector<size_t>& outputs) {
  if (got.outs.size() != want.outs.size()) {
    return std::to_string(got.outs.size()) + " outputs, want " + std::to_string(want.outs.size());
  }
  std::string msg;
  for (size_t i = 0; i < got.outs.size(); ++i) {
    bool listed = outputs.empty();
    for (size_t k : outputs) listed |= k == i;
    if (!listed) continue;
    std::string m = compare(got.outs[i], want.outs[i], tol);
    if (!m.empty()) msg += "output " + std::to_string(i) + ": " + m + "\n";
  }
  for (const auto& [name, t] : want.stored) {
    auto it = got.stored.find(name);
    if (it == got.stored.end()) {
      msg += "stored '" + name + "' missing\n";
      continue;
    }
    std::string m = compare(it->second, t, tol);
    if (!m.empty()) msg += "stored '" + name + "': " + m + "\n";
  }
  for (const auto& [name, t] : got.stored) {
    if (!want.stored.count(name)) msg += "stored '" + name + "' unexpected\n";
  }
  return msg;
}

namespace {

std::string same_bytes(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.meta().str() != b.meta().str()) return what + ": " + a.meta().str() + " vs " + b.meta().str() + "\n";
  if (a.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) != 0) return what + ": different bytes\n";
  return "";
}

}  // namespace

std::string bitwise_equal(const Outcome& a, const Outcome& b) {
  if (a.outs.size() != b.outs.size()) return "different output counts";
  std::string msg;
  for (size_t i = 0; i < a.outs.size(); ++i) msg += same_bytes(a.outs[i], b.outs[i], "output " + std::to_string(i));
  if (a.stored.size() != b.stored.size()) return msg + "different stored tensors";
  for (const auto& [n, t] : a.stored) {
    auto it = b.stored.find(n);
    msg += it == b.stored.end() ? "stored '" + n + "' missing\n" : same_bytes(t, it->second, "stored '" + n + "'");
  }
  return msg;
}

std::string operands_unchanged(const Call& before, const Call& after) {
  std::string msg;
  for (size_t i = 0; i < before.args.size() && i < after.args.size(); ++i) {
    const auto& [name, v] = before.args[i];
    const Value& w = after.args[i].second;
    if (const auto* t = std::get_if<Tensor>(&v)) {
      msg += same_bytes(*t, std::get<Tensor>(w), "operand " + name);
    } else if (const auto* l = std::get_if<TensorList>(&v)) {
      const auto& m = std::get<TensorList>(w);
      for (size_t k = 0; k < l->tensors.size(); ++k) {
        msg += same_bytes(l->tensors[k], m.tensors[k], "operand " + name + "[" + std::to_string(k) + "]");
      }
    }
  }
  for (const auto& [n, t] : before.stored) msg += same_bytes(t, after.stored.at(n), "stored '" + n + "' (old value)");
  return msg;
}

}  // namespace tensord::conformance
