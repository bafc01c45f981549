#include "ops/cpu/elementwise_loop.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ops/convert.h"
#include "ops/cpu/half_simd.h"
#include "ops/error.h"
#include "ops/graph_hooks.h"

namespace tensord::cpu {
namespace {

constexpr int64_t kCastBlock = 1024;  // elements cast per kernel call

bool is_narrow(DType t) {
  return is_floating(t) && t != DType::kFloat32 && t != DType::kFloat64;
}

// Output shape after coalescing: dims of size 1 dropped, neighbours merged
// when every input's strides allow it. The output is contiguous.
struct Plan {
  int nd = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kEwMaxInputs][kMaxRank] = {};
};

Plan make_plan(const Shape& out_shape, const std::vector<const Tensor*>& ins) {
  const size_t r = out_shape.size();
  const size_t nin = ins.size();
  int64_t raw[kEwMaxInputs][kMaxRank] = {};
  for (size_t k = 0; k < nin; ++k) {
    const Shape& s = ins[k]->shape();
    TENSORD_ASSERT(s.size() <= r);
    auto cs = contiguous_strides(s);
    const size_t off = r - s.size();
    for (size_t d = off; d < r; ++d) raw[k][d] = s[d - off] == 1 ? 0 : cs[d - off];
  }
  Plan p;
  for (size_t d = 0; d < r; ++d) {
    if (out_shape[d] == 1) continue;
    bool merge = p.nd > 0;
    for (size_t k = 0; merge && k < nin; ++k) merge = p.stride[k][p.nd - 1] == raw[k][d] * out_shape[d];
    if (merge) {
      p.shape[p.nd - 1] *= out_shape[d];
      for (size_t k = 0; k < nin; ++k) p.stride[k][p.nd - 1] = raw[k][d];
    } else {
      p.shape[p.nd] = out_shape[d];
      for (size_t k = 0; k < nin; ++k) p.stride[k][p.nd] = raw[k][d];
      ++p.nd;
    }
  }
  if (p.nd == 0) {
    p.nd = 1;
    p.shape[0] = 1;
  }
  return p;
}

// convert_elements with the float16/bfloat16 <-> float32 pairs on bulk paths.
void convert_fast(const void* src, DType st, void* dst, DType dt, int64_t n) {
  if (st == DType::kFloat16 && dt == DType::kFloat32) {
    f16_to_f32_n(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
  } else if (st == DType::kFloat32 && dt == DType::kFloat16) {
    f32_to_f16_n(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  } else if (st == DType::kBFloat16 && dt == DType::kFloat32) {
    bf16_to_f32_n(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
  } else if (st == DType::kFloat32 && dt == DType::kBFloat16) {
    f32_to_bf16_n(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  } else {
    convert_elements(src, st, dst, dt, n);
  }
}

// Casts n elements of `src` (dtype st) to dt, optionally rounding through `via`.
void cast_block(const void* src, DType st, void* dst, DType dt, int64_t n, bool use_via, DType via, void* via_buf) {
  if (use_via) {
    convert_fast(src, st, via_buf, via, n);
    convert_fast(via_buf, via, dst, dt, n);
  } else {
    convert_fast(src, st, dst, dt, n);
  }
}

bool needs_via(const EwInput& in) {
  return in.has_round_via && in.round_via != in.tensor->dtype() && in.round_via != in.kernel_dtype;
}

}  // namespace

DType ew_compute_dtype(DType t) {
  return is_narrow(t) ? DType::kFloat32 : t;
}

EwInput ew_input(const Tensor& t, DType common, bool keep_scalar_precision) {
  EwInput in;
  in.tensor = &t;
  in.kernel_dtype = ew_compute_dtype(common);
  if (is_narrow(common) && t.dtype() != common && !(keep_scalar_precision && t.numel() == 1)) {
    in.has_round_via = true;
    in.round_via = common;
  }
  return in;
}

void ew_run(const OpContext& ctx, const Tensor& out, DType kernel_out, std::span<const EwInput> inputs, EwBlockFn fn,
            const void* state, int64_t grain, size_t state_size) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const size_t nin = inputs.size();
  TENSORD_ASSERT(nin >= 1 && nin <= static_cast<size_t>(kEwMaxInputs));

  // Inputs smaller than the output (broadcast ones, scalars) are cast once
  // up front; the others are cast block by block inside the loop.
  std::vector<Tensor> precast;
  precast.reserve(nin);
  std::vector<const Tensor*> ins(nin);
  bool cast[kEwMaxInputs] = {};
  bool via[kEwMaxInputs] = {};
  DType kdt[kEwMaxInputs] = {};
  for (size_t k = 0; k < nin; ++k) {
    const EwInput& in = inputs[k];
    ins[k] = in.tensor;
    kdt[k] = in.kernel_dtype;
    if (in.tensor->dtype() == in.kernel_dtype) continue;
    if (in.tensor->numel() < total) {
      Tensor t = Tensor::empty_host(in.kernel_dtype, in.tensor->shape());
      std::unique_ptr<unsigned char[]> tmp;
      if (needs_via(in))
        tmp.reset(new unsigned char[static_cast<size_t>(in.tensor->numel()) * dtype_size(in.round_via)]);
      cast_block(in.tensor->data(), in.tensor->dtype(), t.data(), in.kernel_dtype, in.tensor->numel(), needs_via(in),
                 in.round_via, tmp.get());
      precast.push_back(std::move(t));
      ins[k] = &precast.back();
    } else {
      cast[k] = true;
      via[k] = needs_via(in);
    }
  }
  const bool stage = kernel_out != out.dtype();
  bool any_cast = stage;
  for (size_t k = 0; k < nin; ++k) any_cast = any_cast || cast[k];

  const Plan p = make_plan(out.shape(), ins);
  const int nd = p.nd;
  const size_t out_es = dtype_size(out.dtype());
  char* const out_base = static_cast<char*>(out.data());
  const char* in_base[kEwMaxInputs] = {};
  size_t in_es[kEwMaxInputs] = {};
  int64_t inner_stride[kEwMaxInputs] = {};
  for (size_t k = 0; k < nin; ++k) {
    in_base[k] = static_cast<const char*>(ins[k]->data());
    in_es[k] = dtype_size(ins[k]->dtype());
    inner_stride[k] = p.stride[k][nd - 1];
    TENSORD_ASSERT(inner_stride[k] == 0 || inner_stride[k] == 1);
  }
  if (BlockRecorder* rec = graph_recorder(ctx.graph)) {
    // One flat loop over buffers that replays as it ran (recorded_block.h).
    ++rec->calls;
    const bool copyable = state_size != kEwStateNotCopyable && (state == nullptr || state_size > 0);
    // A cast operand replays only when it is a literal (a constant scalar,
    // cast the same way every time): the block keeps the cast value.
    bool inline_ok = true;
    for (size_t k = 0; k < nin; ++k) {
      if (ins[k] == inputs[k].tensor) continue;
      inline_ok = inline_ok && ins[k]->numel() == 1 && inputs[k].tensor->meta().wrapped_number &&
                  in_es[k] <= sizeof(RecordedBlock::inline_in[0]);
    }
    if (!inline_ok || any_cast || nd > 2 || !copyable) {
      rec->reject();
    } else {
      RecordedBlock& b = rec->block;
      b.fn = fn;
      b.has_state = state != nullptr;
      if (b.has_state) std::memcpy(b.state, state, state_size);
      b.n_inputs = static_cast<int>(nin);
      b.out = out_base;
      b.out_elem = out_es;
      b.inline_mask = 0;
      for (size_t k = 0; k < nin; ++k) {
        b.in[k] = in_base[k];
        b.in_elem[k] = in_es[k];
        b.stride[k] = inner_stride[k];
        if (ins[k] != inputs[k].tensor) {
          std::memcpy(b.inline_in[k], in_base[k], in_es[k]);
          b.inline_mask |= 1u << k;
        }
      }
      b.n = total;
      b.out_count = total;
      b.grain = grain;
      b.rows = nd == 2 ? p.shape[0] : 1;
      b.row_len = p.shape[nd - 1];
      for (size_t k = 0; k < nin; ++k) b.row_stride[k] = nd == 2 ? p.stride[k][0] : 0;
    }
  }

  ctx.parallel_for(total, grain, [&](int64_t begin, int64_t end) {
    // Per-task cast buffers (only when some input is cast in the loop).
    std::unique_ptr<unsigned char[]> bufs;
    unsigned char* buf[kEwMaxInputs] = {};
    unsigned char* via_buf = nullptr;
    unsigned char* stage_buf = nullptr;
    if (any_cast) {
      constexpr size_t kSlot = static_cast<size_t>(kCastBlock) * 16;
      bufs.reset(new unsigned char[kSlot * (nin + 2)]);
      for (size_t k = 0; k < nin; ++k) buf[k] = bufs.get() + kSlot * k;
      via_buf = bufs.get() + kSlot * nin;
      stage_buf = bufs.get() + kSlot * (nin + 1);
    }

    auto process = [&](int64_t out_off, const int64_t* in_off, int64_t len) {
      char* o = out_base + static_cast<size_t>(out_off) * out_es;
      const void* ptr[kEwMaxInputs];
      for (size_t k = 0; k < nin; ++k) ptr[k] = in_base[k] + static_cast<size_t>(in_off[k]) * in_es[k];
      if (!any_cast) {
        fn(state, o, ptr, inner_stride, len);
        return;
      }
      const void* cptr[kEwMaxInputs];
      for (int64_t b = 0; b < len; b += kCastBlock) {
        const int64_t m = std::min(kCastBlock, len - b);
        for (size_t k = 0; k < nin; ++k) {
          const char* src = static_cast<const char*>(ptr[k]) + static_cast<size_t>(b * inner_stride[k]) * in_es[k];
          if (cast[k]) {
            const int64_t cnt = inner_stride[k] ? m : 1;
            cast_block(src, ins[k]->dtype(), buf[k], kdt[k], cnt, via[k], inputs[k].round_via, via_buf);
            cptr[k] = buf[k];
          } else {
            cptr[k] = src;
          }
        }
        char* dst = o + static_cast<size_t>(b) * out_es;
        if (stage) {
          fn(state, stage_buf, cptr, inner_stride, m);
          convert_fast(stage_buf, kernel_out, dst, out.dtype(), m);
        } else {
          fn(state, dst, cptr, inner_stride, m);
        }
      }
    };

    // Multi-index of `begin` in the coalesced shape, and input offsets.
    int64_t idx[kMaxRank] = {};
    int64_t off[kEwMaxInputs] = {};
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rem % p.shape[d];
      rem /= p.shape[d];
      for (size_t k = 0; k < nin; ++k) off[k] += idx[d] * p.stride[k][d];
    }
    int64_t pos = begin;
    const int inner = nd - 1;
    while (pos < end) {
      const int64_t len = std::min(p.shape[inner] - idx[inner], end - pos);
      process(pos, off, len);
      pos += len;
      if (pos >= end) break;
      idx[inner] += len;
      for (size_t k = 0; k < nin; ++k) off[k] += len * p.stride[k][inner];
      for (int d = inner; d > 0 && idx[d] == p.shape[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (size_t k = 0; k < nin; ++k) off[k] += p.stride[k][d - 1] - p.shape[d] * p.stride[k][d];
      }
    }
  });
}

namespace {

template <class T>
void copy_block(const void*, void* out, const void* const* in, const int64_t* st, int64_t n) {
  T* o = static_cast<T*>(out);
  const T* a = static_cast<const T*>(in[0]);
  if (st[0]) {
    std::memcpy(o, a, static_cast<size_t>(n) * sizeof(T));
  } else {
    T v;
    std::memcpy(&v, a, sizeof(T));
    std::fill(o, o + n, v);
  }
}

struct Bytes16 {
  uint64_t lo, hi;
};

}  // namespace

void ew_cast_copy(const OpContext& ctx, const Tensor& out, const Tensor& src) {
  EwInput in;
  in.tensor = &src;
  in.kernel_dtype = out.dtype();
  EwBlockFn fn = nullptr;
  switch (dtype_size(out.dtype())) {
    case 1:
      fn = &copy_block<uint8_t>;
      break;
    case 2:
      fn = &copy_block<uint16_t>;
      break;
    case 4:
      fn = &copy_block<uint32_t>;
      break;
    case 8:
      fn = &copy_block<uint64_t>;
      break;
    case 16:
      fn = &copy_block<Bytes16>;
      break;
    default:
      TENSORD_ASSERT(false);
  }
  ew_run(ctx, out, out.dtype(), std::span<const EwInput>(&in, 1), fn, nullptr);
}

}  // namespace tensord::cpu
