// Creation ops: full zeros ones arange rand randn (PyTorch semantics).
// rand/randn draw from Philox4x32-10 (ops/kernels/philox.h): element i
// depends only on (seed, i), so results are bit-identical however the work is
// split over threads; without `seed` a fresh seed comes from
// std::random_device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>

#include "ops/convert.h"
#include "ops/cpu/register.h"
#include "ops/dispatch.h"
#include "ops/error.h"
#include "ops/kernels/philox.h"
#include "ops/kernels/scalar_traits.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

constexpr int64_t kFillGrain = int64_t{1} << 16;  // elements per parallel chunk

ParamSpec size_param() {
  return ParamSpec{"size", ParamKind::kIntList, Attr(), false, false};
}
ParamSpec dtype_kwarg(Attr def) {
  bool none = def.is_none();
  return ParamSpec{"dtype", ParamKind::kDType, std::move(def), none, true};
}

Shape size_of(const Attr& a, const char* op) {
  Shape s = a.to_int_list((std::string(op) + ": size").c_str());
  shape_numel(s);  // negative dims, rank and element-count limits
  return s;
}

std::optional<DType> optional_dtype(const Attr& a, const char* op) {
  if (a.is_none()) return std::nullopt;
  return a.to_dtype((std::string(op) + ": dtype").c_str());
}

// ---- fill ----

struct Bytes16 {
  uint64_t lo, hi;
};

template <class E>
void fill_typed(const OpContext& ctx, E* dst, int64_t n, E v) {
  ctx.parallel_for(n, kFillGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = v;
  });
}

// Fills `t` with copies of the element at `elem` (dtype_size(t.dtype()) bytes).
void fill_bytes(const OpContext& ctx, const Tensor& t, const void* elem) {
  const int64_t n = t.numel();
  if (n == 0) return;
  switch (dtype_size(t.dtype())) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, elem, 1);
      return fill_typed(ctx, t.data_ptr<uint8_t>(), n, v);
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, elem, 2);
      return fill_typed(ctx, t.data_ptr<uint16_t>(), n, v);
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, elem, 4);
      return fill_typed(ctx, t.data_ptr<uint32_t>(), n, v);
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, elem, 8);
      return fill_typed(ctx, t.data_ptr<uint64_t>(), n, v);
    }
    case 16: {
      Bytes16 v;
      std::memcpy(&v, elem, 16);
      return fill_typed(ctx, t.data_ptr<Bytes16>(), n, v);
    }
    default:
      TENSORD_ASSERT(false && "fill: unsupported element size");
  }
}

[[noreturn]] void overflow(const char* op, const Attr& v, DType t) {
  throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": value " + v.repr() + " cannot be converted to type " +
                                               std::string(dtype_name(t)) + " without overflow");
}

// Encodes the scalar `v` as one element of dtype `t` into `out` (16 bytes),
// rejecting values the type cannot hold as PyTorch's checked conversion does.
void encode_scalar(const Attr& v, DType t, void* out, const char* op) {
  std::memset(out, 0, 16);
  if (t == DType::kBool) {
    bool b = v.is_bool() ? v.to_bool(op) : v.to_double(op) != 0.0;
    std::memcpy(out, &b, 1);
    return;
  }
  if (is_integral(t, false)) {
    int64_t i;
    if (v.is_double()) {
      double d = v.to_double(op);
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) overflow(op, v, t);
      i = static_cast<int64_t>(d);
    } else {
      i = v.to_int(op);
    }
    dispatch_dtype(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
          overflow(op, v, t);
        }
        T x = static_cast<T>(i);
        std::memcpy(out, &x, sizeof(T));
      }
    });
    return;
  }
  const double d = v.to_double(op);
  double limit = 0;
  if (t == DType::kFloat32) limit = std::numeric_limits<float>::max();
  if (t == DType::kFloat16) limit = 65504.0;
  if (t == DType::kBFloat16) limit = 3.3895313892515355e38;
  if (limit > 0 && std::isfinite(d) && std::fabs(d) > limit) overflow(op, v, t);
  store_from_double(t, out, 0, d);
}

// ---- arange ----

struct ArangePlan {
  DType dtype = DType::kInt64;
  int64_t n = 0;
  bool integral = true;  // values are istart + i * istep (wrapping int64)
  int64_t istart = 0, istep = 1;
  double dstart = 0, dstep = 1;
};

ArangePlan arange_plan(const Attr& start_a, const Attr& end_a, const Attr& step_a, const Attr& dtype_a) {
  Attr start = start_a, end = end_a;
  if (end.is_none()) {  // arange(end)
    end = start;
    start = Attr(int64_t{0});
  }
  ArangePlan p;
  const bool all_int = !start.is_double() && !end.is_double() && !step_a.is_double();
  p.dtype = optional_dtype(dtype_a, "arange").value_or(all_int ? DType::kInt64 : DType::kFloat32);
  const bool float_ok = p.dtype == DType::kFloat16 || p.dtype == DType::kBFloat16 || p.dtype == DType::kFloat32 ||
                        p.dtype == DType::kFloat64;
  if (!is_integral(p.dtype, false) && !float_ok) {
    throw Error(ErrorCode::kDtypeMismatch, "arange: not implemented for dtype " + std::string(dtype_name(p.dtype)));
  }
  p.integral = is_integral(p.dtype, false);
  if (p.integral) {
    // As PyTorch: the bounds are converted to the integer type first.
    auto to_i = [](const Attr& a, const char* what) -> int64_t {
      if (!a.is_double()) return a.to_int(what);
      double d = a.to_double(what);
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
        throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": " + a.repr() + " is out of range");
      }
      return static_cast<int64_t>(d);
    };
    const int64_t s = to_i(start, "arange: start"), e = to_i(end, "arange: end");
    const int64_t st = to_i(step_a, "arange: step");
    if (st == 0) throw Error(ErrorCode::kInvalidArgument, "arange: step must be nonzero");
    if ((st > 0 && e < s) || (st < 0 && e > s)) {
      throw Error(ErrorCode::kInvalidArgument, "arange: upper bound and lower bound inconsistent with step sign");
    }
    // Exact ceil(|e - s| / |st|) in unsigned arithmetic (no overflow).
    const uint64_t diff = st > 0 ? static_cast<uint64_t>(e) - static_cast<uint64_t>(s)
                                 : static_cast<uint64_t>(s) - static_cast<uint64_t>(e);
    const uint64_t ast = st > 0 ? static_cast<uint64_t>(st) : uint64_t{0} - static_cast<uint64_t>(st);
    const uint64_t n = diff / ast + (diff % ast != 0 ? 1 : 0);
    p.n = static_cast<int64_t>(std::min<uint64_t>(n, static_cast<uint64_t>(kMaxNumel) + 1));
    p.istart = s;
    p.istep = st;
  } else {
    const double s = start.to_double("arange: start"), e = end.to_double("arange: end");
    const double st = step_a.to_double("arange: step");
    if (!std::isfinite(s) || !std::isfinite(e) || !std::isfinite(st)) {
      throw Error(ErrorCode::kInvalidArgument, "arange: unsupported range: " + start.repr() + " -> " + end.repr());
    }
    if (st == 0) throw Error(ErrorCode::kInvalidArgument, "arange: step must be nonzero");
    if ((st > 0 && e < s) || (st < 0 && e > s)) {
      throw Error(ErrorCode::kInvalidArgument, "arange: upper bound and lower bound inconsistent with step sign");
    }
    const double n = std::ceil((e - s) / st);
    p.n = n > static_cast<double>(kMaxNumel) ? kMaxNumel + 1 : static_cast<int64_t>(n);
    p.dstart = s;
    p.dstep = st;
  }
  shape_numel(Shape{p.n});  // too many elements -> invalid_argument
  return p;
}

void arange_fill(const OpContext& ctx, const Tensor& out, const ArangePlan& p) {
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data_ptr<T>();
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const auto s = static_cast<uint64_t>(p.istart), st = static_cast<uint64_t>(p.istep);
      ctx.parallel_for(p.n, kFillGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) dst[i] = static_cast<T>(s + static_cast<uint64_t>(i) * st);
      });
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                         std::is_same_v<T, BFloat16>) {
      using Traits = kernels::ScalarTraits<T>;
      using C = typename Traits::compute_t;
      ctx.parallel_for(p.n, kFillGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          dst[i] = Traits::store(static_cast<C>(p.dstart + static_cast<double>(i) * p.dstep));
        }
      });
    } else {
      TENSORD_ASSERT(false && "arange: dtype rejected by arange_plan");
    }
  });
}

// ---- rand / randn ----

enum class Dist { kUniform, kNormal };

bool random_dtype_ok(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 || t == DType::kFloat64 ||
         t == DType::kComplex64 || t == DType::kComplex128;
}

// Fills n_real values of `dst` (float, double or uint16 for half/bfloat16):
// block b of the Philox stream gives values [b * per, (b + 1) * per).
template <int kPer, class Out, class Gen>
void generate_blocks(const OpContext& ctx, Out* dst, int64_t n_real, uint64_t seed, Gen gen) {
  const int64_t blocks = (n_real + kPer - 1) / kPer;
  const int64_t full = n_real / kPer;  // blocks that lie wholly inside
  ctx.parallel_for(blocks, 4096, [&](int64_t b, int64_t e) {
    const int64_t mid = std::clamp(full, b, e);
    // Straight into the output: a loop the compiler can vectorize.
    for (int64_t blk = b; blk < mid; ++blk)
      gen(kernels::philox_block(seed, static_cast<uint64_t>(blk)), dst + blk * kPer);
    for (int64_t blk = mid; blk < e; ++blk) {  // the last, partial block
      Out vals[kPer];
      gen(kernels::philox_block(seed, static_cast<uint64_t>(blk)), vals);
      for (int64_t k = 0; k < n_real - blk * kPer; ++k) dst[blk * kPer + k] = vals[k];
    }
  });
}

void random_fill(const OpContext& ctx, const Tensor& out, Dist dist, uint64_t seed) {
  const DType t = out.dtype();
  const int64_t n_real = out.numel() * (is_complex(t) ? 2 : 1);
  if (n_real == 0) return;
  // torch.randn for complex: real and imaginary parts are N(0, 1/2).
  const bool halve = is_complex(t);
  if (t == DType::kFloat64 || t == DType::kComplex128) {
    auto* dst = static_cast<double*>(out.data());
    if (dist == Dist::kUniform) {
      generate_blocks<2>(ctx, dst, n_real, seed, [](kernels::Philox4x32 w, double* v) {
        v[0] = kernels::uniform_double(w.v[0], w.v[1]);
        v[1] = kernels::uniform_double(w.v[2], w.v[3]);
      });
    } else {
      const double scale = halve ? 0.70710678118654752440 : 1.0;
      generate_blocks<2>(ctx, dst, n_real, seed, [scale](kernels::Philox4x32 w, double* v) {
        kernels::normal_pair_double(w, &v[0], &v[1]);
        v[0] *= scale;
        v[1] *= scale;
      });
    }
    return;
  }
  if (t == DType::kFloat32 || t == DType::kComplex64) {
    auto* dst = static_cast<float*>(out.data());
    if (dist == Dist::kUniform) {
      generate_blocks<4>(ctx, dst, n_real, seed, [](kernels::Philox4x32 w, float* v) {
        for (int k = 0; k < 4; ++k) v[k] = kernels::uniform_float(w.v[k], 24);
      });
    } else {
      const float scale = halve ? 0.70710678118654752440f : 1.0f;
      generate_blocks<4>(ctx, dst, n_real, seed, [scale](kernels::Philox4x32 w, float* v) {
        kernels::normal_pair_float(w.v[0], w.v[1], &v[0], &v[1]);
        kernels::normal_pair_float(w.v[2], w.v[3], &v[2], &v[3]);
        for (int k = 0; k < 4; ++k) v[k] *= scale;
      });
    }
    return;
  }
  // float16 / bfloat16: uniform from as many bits as the type's significand
  // (so rounding never reaches 1.0), normals computed in float and rounded.
  const bool half = t == DType::kFloat16;
  auto* dst = static_cast<uint16_t*>(out.data());
  auto enc = [half](float f) { return half ? kernels::f32_to_f16(f) : kernels::f32_to_bf16(f); };
  if (dist == Dist::kUniform) {
    const int bits = half ? 11 : 8;
    generate_blocks<4>(ctx, dst, n_real, seed, [bits, enc](kernels::Philox4x32 w, uint16_t* v) {
      for (int k = 0; k < 4; ++k) v[k] = enc(kernels::uniform_float(w.v[k], bits));
    });
  } else {
    generate_blocks<4>(ctx, dst, n_real, seed, [enc](kernels::Philox4x32 w, uint16_t* v) {
      float z[4];
      kernels::normal_pair_float(w.v[0], w.v[1], &z[0], &z[1]);
      kernels::normal_pair_float(w.v[2], w.v[3], &z[2], &z[3]);
      for (int k = 0; k < 4; ++k) v[k] = enc(z[k]);
    });
  }
}

uint64_t seed_of(const Attr& a, const char* op) {
  if (!a.is_none()) return static_cast<uint64_t>(a.to_int((std::string(op) + ": seed").c_str()));
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

// ---- registration ----

void add_full(OpRegistry& r) {
  OpDef op;
  op.name = "full";
  op.doc = "A tensor of shape `size` filled with fill_value; dtype None infers bool/int64/float32 from the value.";
  op.params = {size_param(), ParamSpec{"fill_value", ParamKind::kFloat, Attr(), false, false}, dtype_kwarg(Attr())};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  auto dtype_of = [](const std::vector<Attr>& a) {
    if (a[1].is_none()) throw Error(ErrorCode::kInvalidArgument, "full: fill_value is required");
    if (!a[1].is_number()) throw Error(ErrorCode::kInvalidArgument, "full: fill_value must be a number or bool");
    DType inferred = a[1].is_bool() ? DType::kBool : a[1].is_int() ? DType::kInt64 : DType::kFloat32;
    return optional_dtype(a[2], "full").value_or(inferred);
  };
  op.infer = [dtype_of](const OpArgs<TensorMeta>& a) {
    DType t = dtype_of(a.attrs);
    unsigned char elem[16];
    encode_scalar(a.attr(1), t, elem, "full");  // range errors surface at inference
    return std::vector<TensorMeta>{{t, size_of(a.attr(0), "full")}};
  };
  op.kernels["cpu"] = [dtype_of](const OpContext& ctx, const OpArgs<Tensor>& a) {
    DType t = dtype_of(a.attrs);
    Tensor out = ctx.empty(t, size_of(a.attr(0), "full"));
    alignas(16) unsigned char elem[16];
    encode_scalar(a.attr(1), t, elem, "full");
    fill_bytes(ctx, out, elem);
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

void add_constant(OpRegistry& r, const char* name, double value) {
  OpDef op;
  op.name = name;
  op.doc = value == 0 ? "A tensor of shape `size` filled with zeros." : "A tensor of shape `size` filled with ones.";
  op.params = {size_param(), dtype_kwarg(Attr("float32"))};
  op.outputs = {"out"};
  op.dtypes = dtypes_all();
  std::string n = name;
  op.infer = [n](const OpArgs<TensorMeta>& a) {
    return std::vector<TensorMeta>{{a.attr(1).to_dtype((n + ": dtype").c_str()), size_of(a.attr(0), n.c_str())}};
  };
  op.kernels["cpu"] = [n, value](const OpContext& ctx, const OpArgs<Tensor>& a) {
    DType t = a.attr(1).to_dtype((n + ": dtype").c_str());
    Tensor out = ctx.empty(t, size_of(a.attr(0), n.c_str()));
    alignas(16) unsigned char elem[16] = {};
    store_from_double(t, elem, 0, value);
    fill_bytes(ctx, out, elem);
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

void add_arange(OpRegistry& r) {
  OpDef op;
  op.name = "arange";
  op.doc =
      "Values start, start+step, ... below end (arange(n) = 0..n-1); int args give int64, any float gives float32.";
  op.params = {ParamSpec{"start", ParamKind::kFloat, Attr(), false, false},
               ParamSpec{"end", ParamKind::kFloat, Attr(), true, false},
               ParamSpec{"step", ParamKind::kFloat, Attr(int64_t{1}), false, false}, dtype_kwarg(Attr())};
  op.outputs = {"out"};
  op.dtypes = dtypes_join({dtypes_integral(), dtypes_floating()});
  op.infer = [](const OpArgs<TensorMeta>& a) {
    ArangePlan p = arange_plan(a.attr(0), a.attr(1), a.attr(2), a.attr(3));
    return std::vector<TensorMeta>{{p.dtype, Shape{p.n}}};
  };
  op.kernels["cpu"] = [](const OpContext& ctx, const OpArgs<Tensor>& a) {
    ArangePlan p = arange_plan(a.attr(0), a.attr(1), a.attr(2), a.attr(3));
    Tensor out = ctx.empty(p.dtype, Shape{p.n});
    arange_fill(ctx, out, p);
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

void add_random(OpRegistry& r, const char* name, Dist dist) {
  OpDef op;
  op.name = name;
  op.doc = dist == Dist::kUniform
               ? "Uniform random values in [0, 1); deterministic given `seed` (Philox4x32-10, counter = element)."
               : "Standard normal random values; deterministic given `seed` (Philox4x32-10 + Box-Muller).";
  op.params = {size_param(), dtype_kwarg(Attr("float32")), ParamSpec{"seed", ParamKind::kInt, Attr(), true, true}};
  op.outputs = {"out"};
  op.replication = RankReplication::kWhenSeeded;  // equal on every rank only given the same seed
  op.dtypes = dtypes_join({dtypes_floating(), dtypes_complex()});
  std::string n = name;
  auto dtype_of = [n](const Attr& a) {
    DType t = a.to_dtype((n + ": dtype").c_str());
    if (!random_dtype_ok(t)) {
      throw Error(ErrorCode::kDtypeMismatch,
                  n + ": unsupported dtype " + std::string(dtype_name(t)) + " (expected a floating or complex dtype)");
    }
    return t;
  };
  op.infer = [n, dtype_of](const OpArgs<TensorMeta>& a) {
    if (!a.attr(2).is_none()) a.attr(2).to_int((n + ": seed").c_str());
    return std::vector<TensorMeta>{{dtype_of(a.attr(1)), size_of(a.attr(0), n.c_str())}};
  };
  op.kernels["cpu"] = [n, dist, dtype_of](const OpContext& ctx, const OpArgs<Tensor>& a) {
    Tensor out = ctx.empty(dtype_of(a.attr(1)), size_of(a.attr(0), n.c_str()));
    random_fill(ctx, out, dist, seed_of(a.attr(2), n.c_str()));
    return std::vector<Tensor>{out};
  };
  r.add(std::move(op));
}

}  // namespace

void register_creation_ops(OpRegistry& r) {
  add_full(r);
  add_constant(r, "zeros", 0.0);
  add_constant(r, "ones", 1.0);
  add_arange(r);
  add_random(r, "rand", Dist::kUniform);
  add_random(r, "randn", Dist::kNormal);
}

}  // namespace tensord
