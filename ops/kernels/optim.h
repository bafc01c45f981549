// Element updates of the fused optimizers (API.md section 6), written once for
// the CPU loop (ops/cpu/optim_loop.cpp) and the CUDA multi-tensor-apply kernel
// (ops/cuda/optim_fused.cu). `M` is the math type: float for float32,
// bfloat16 and float16 parameters (PyTorch's opmath), double for float64.
//
// The operation order is that of PyTorch's fused kernels
// (aten/src/ATen/native/cpu/Fused{Adam,SGD,Adagrad}Kernel.cpp): the gradient
// is divided by grad_scale, negated for maximize, then weight decay, the
// moment updates, and the parameter update. Per-step scalars (bias
// corrections, clr) are computed in double on the host like PyTorch's and
// rounded once to M.
#pragma once

#include <cmath>

#include "ops/kernels/common.h"

namespace tensord::kernels {

template <class M>
TENSORD_INLINE M optim_sqrt(M x) {
#if defined(__CUDA_ARCH__)
  return sqrt(x);
#else
  return std::sqrt(x);
#endif
}

// torch.lerp's two-branch form, with the branch chosen once per step
// (weight < 0.5: start + w*(end - start); else end - (end - start)*(1 - w)),
// written as base + coeff*(end - start) like the vectorised CPU kernel.
template <class M>
struct LerpCoeffs {
  M coeff = M(0);  // w, or w - 1
  bool from_start = true;

  static LerpCoeffs make(double w) {
    LerpCoeffs c;
    c.from_start = std::abs(w) < 0.5;
    c.coeff = c.from_start ? static_cast<M>(w) : static_cast<M>(w) - M(1);
    return c;
  }
  TENSORD_INLINE M apply(M start, M end) const {
    const M base = from_start ? start : end;
    return base + coeff * (end - start);
  }
};

// ---------------------------------------------------------------- Adam / AdamW

template <class M>
struct AdamScalars {
  M grad_scale = M(1);    // gradients are divided by it (AMP); 1 when absent
  M grad_sign = M(1);     // -1 for maximize
  M weight_decay = M(0);  // Adam: added to the gradient as weight_decay * param
  M param_decay = M(1);   // AdamW: param *= 1 - lr * weight_decay
  LerpCoeffs<M> beta1;    // exp_avg.lerp_(grad, 1 - beta1)
  M beta2 = M(0);
  M one_minus_beta2 = M(0);
  M bias_correction2_sqrt = M(1);
  M eps = M(0);
  M neg_step_size = M(0);  // -lr / bias_correction1
};

// kDecay: weight_decay != 0 (Adam's L2 term is skipped otherwise, as in
// PyTorch, so an infinite parameter does not turn the gradient into NaN).
template <class M, bool kAdamW, bool kDecay, bool kAmsgrad>
TENSORD_INLINE void adam_update(M& param, M grad, M& exp_avg, M& exp_avg_sq, M& max_exp_avg_sq,
                                const AdamScalars<M>& s) {
  M g = grad / s.grad_scale * s.grad_sign;
  M p = param;
  if constexpr (kDecay) {
    if constexpr (kAdamW) {
      p = p * s.param_decay;
    } else {
      g = g + p * s.weight_decay;
    }
  }
  const M m = s.beta1.apply(exp_avg, g);
  const M v = exp_avg_sq * s.beta2 + s.one_minus_beta2 * g * g;
  M denom_sq = v;
  if constexpr (kAmsgrad) {
    const M vmax = max_exp_avg_sq > v ? max_exp_avg_sq : v;
    max_exp_avg_sq = vmax;
    denom_sq = vmax;
  }
  const M denom = optim_sqrt(denom_sq) / s.bias_correction2_sqrt + s.eps;
  param = p + s.neg_step_size * m / denom;
  exp_avg = m;
  exp_avg_sq = v;
}

// ---------------------------------------------------------------- SGD

template <class M>
struct SgdScalars {
  M grad_scale = M(1);
  M grad_sign = M(1);
  M weight_decay = M(0);
  M momentum = M(0);
  M one_minus_dampening = M(1);
  M neg_lr = M(0);
};

// kMomentum: momentum != 0 (a momentum_buffer exists); kFirst: the buffer is
// created from this step's gradient (PyTorch: buf = clone(d_p)).
template <class M, bool kDecay, bool kMomentum, bool kNesterov, bool kFirst>
TENSORD_INLINE void sgd_update(M& param, M grad, M& momentum_buffer, const SgdScalars<M>& s) {
  M g = grad / s.grad_scale * s.grad_sign;
  const M p = param;
  if constexpr (kDecay) g = p * s.weight_decay + g;
  if constexpr (kMomentum) {
    M buf;
    if constexpr (kFirst) {
      buf = g;
    } else {
      buf = momentum_buffer * s.momentum + s.one_minus_dampening * g;
    }
    momentum_buffer = buf;
    if constexpr (kNesterov) {
      g = buf * s.momentum + g;
    } else {
      g = buf;
    }
  }
  param = p + g * s.neg_lr;
}

// ---------------------------------------------------------------- Adagrad

template <class M>
struct AdagradScalars {
  M grad_scale = M(1);
  M grad_sign = M(1);
  M weight_decay = M(0);
  M eps = M(0);
  M clr = M(0);  // lr / (1 + (step - 1) * lr_decay)
};

template <class M, bool kDecay>
TENSORD_INLINE void adagrad_update(M& param, M grad, M& sum, const AdagradScalars<M>& s) {
  M g = grad / s.grad_scale * s.grad_sign;
  const M p = param;
  if constexpr (kDecay) g = g + p * s.weight_decay;
  const M acc = sum + g * g;
  sum = acc;
  const M std_dev = optim_sqrt(acc) + s.eps;
  param = p - s.clr * g / std_dev;
}

// ---------------------------------------------------------------- Muon (elementwise parts)

template <class M>
struct MuonScalars {
  LerpCoeffs<M> buf;       // buf.lerp_(grad, 1 - momentum)
  LerpCoeffs<M> nesterov;  // update = grad.lerp(buf, momentum)
  M param_decay = M(1);    // 1 - lr * weight_decay (the unadjusted lr)
  M neg_adjusted_lr = M(0);
};

// The momentum pass: new buffer and the matrix Newton-Schulz orthogonalises.
template <class M, bool kNesterov>
TENSORD_INLINE M muon_momentum(M grad, M& momentum_buffer, const MuonScalars<M>& s) {
  const M buf = s.buf.apply(momentum_buffer, grad);
  momentum_buffer = buf;
  if constexpr (kNesterov) {
    return s.nesterov.apply(grad, buf);
  } else {
    return buf;
  }
}

// The parameter pass: param.mul_(1 - lr*wd); param.add_(ortho, alpha=-adjusted_lr).
template <class M>
TENSORD_INLINE M muon_apply(M param, M ortho, const MuonScalars<M>& s) {
  const M p = param * s.param_decay;
  return p + s.neg_adjusted_lr * ortho;
}

// ---------------------------------------------------------------- host-side scalars
// Hyper-parameters as the op receives them, and the per-tensor, per-step
// scalars built from them in double and rounded once to M (as PyTorch's
// fused kernels do with `scalar_t(step_size)` etc.).

struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool adamw = false, amsgrad = false, maximize = false;
  double grad_scale = 1;
};

template <class M>
AdamScalars<M> adam_scalars(const AdamHyper& h, double step) {
  AdamScalars<M> s;
  s.grad_scale = static_cast<M>(h.grad_scale);
  s.grad_sign = h.maximize ? M(-1) : M(1);
  s.weight_decay = h.adamw ? M(0) : static_cast<M>(h.weight_decay);
  s.param_decay = h.adamw ? static_cast<M>(1 - h.lr * h.weight_decay) : M(1);
  s.beta1 = LerpCoeffs<M>::make(1 - h.beta1);
  s.beta2 = static_cast<M>(h.beta2);
  s.one_minus_beta2 = static_cast<M>(1 - h.beta2);
  const double bias_correction1 = 1 - std::pow(h.beta1, step);
  const double bias_correction2 = 1 - std::pow(h.beta2, step);
  s.bias_correction2_sqrt = static_cast<M>(std::sqrt(bias_correction2));
  s.eps = static_cast<M>(h.eps);
  s.neg_step_size = static_cast<M>(-(h.lr / bias_correction1));
  return s;
}

struct SgdHyper {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  double grad_scale = 1;
};

template <class M>
SgdScalars<M> sgd_scalars(const SgdHyper& h) {
  SgdScalars<M> s;
  s.grad_scale = static_cast<M>(h.grad_scale);
  s.grad_sign = h.maximize ? M(-1) : M(1);
  s.weight_decay = static_cast<M>(h.weight_decay);
  s.momentum = static_cast<M>(h.momentum);
  s.one_minus_dampening = static_cast<M>(1 - h.dampening);
  s.neg_lr = static_cast<M>(-h.lr);
  return s;
}

struct AdagradHyper {
  double lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
  bool maximize = false;
  double grad_scale = 1;
};

template <class M>
AdagradScalars<M> adagrad_scalars(const AdagradHyper& h, double step) {
  AdagradScalars<M> s;
  s.grad_scale = static_cast<M>(h.grad_scale);
  s.grad_sign = h.maximize ? M(-1) : M(1);
  s.weight_decay = static_cast<M>(h.weight_decay);
  s.eps = static_cast<M>(h.eps);
  s.clr = static_cast<M>(h.lr / (1.0 + (step - 1.0) * h.lr_decay));
  return s;
}

struct MuonHyper {
  double lr = 1e-3, weight_decay = 0.1, momentum = 0.95;
  bool nesterov = true;
  double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315;
  double eps = 1e-7;
  int ns_steps = 5;
  bool match_rms_adamw = false;  // adjust_lr_fn: "original" (false) or "match_rms_adamw"
};

// Scalars for an A x B parameter: the adjusted lr scales the update only;
// weight decay uses the unadjusted lr (torch.optim.Muon).
template <class M>
MuonScalars<M> muon_scalars(const MuonHyper& h, double rows, double cols) {
  MuonScalars<M> s;
  s.buf = LerpCoeffs<M>::make(1 - h.momentum);
  s.nesterov = LerpCoeffs<M>::make(h.momentum);
  s.param_decay = static_cast<M>(1 - h.lr * h.weight_decay);
  const double ratio =
      h.match_rms_adamw ? 0.2 * std::sqrt(rows > cols ? rows : cols) : std::sqrt(rows / cols > 1 ? rows / cols : 1.0);
  s.neg_adjusted_lr = static_cast<M>(-(h.lr * ratio));
  return s;
}

}  // namespace tensord::kernels
