// mx_kernel_bench: MX quantize and dequantize throughput at kernel level
// (ops/cpu/mx_loop.cpp into preallocated outputs, so page faults of fresh
// buffers are not counted) against memcpy of the same float32 bytes measured
// in the same run (and dequantize through mx_dequantize_range in runs of
// 256, as matmul reads an MX operand). GB/s counts the float32 side: input bytes for quantize,
// output bytes for dequantize. Quantize runs both loops: the portable one
// and the AVX2 one (ops/cpu/mx_quantize_avx2.cpp) where the CPU has it.
// One JSON object per line on stdout.
//
//   mx_kernel_bench [--numel N] [--reps R] [--threads P]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/mx_loop.h"
#include "ops/cpu/mx_quantize_avx2.h"
#include "ops/cpu/thread_pool.h"
#include "ops/mx_tensor.h"
#include "ops/tensor.h"

namespace {

using tensord::DType;
using tensord::Tensor;
using tensord::kernels::MxFormat;
using tensord::kernels::MxScaleRounding;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double median_s(int reps, F&& fn) {
  std::vector<double> t;
  fn();  // warm
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    fn();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t numel = int64_t{1} << 24;
  int reps = 9;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--numel") numel = std::atoll(argv[i + 1]);
    if (a == "--reps") reps = std::atoi(argv[i + 1]);
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
  }
  numel = numel / 32 * 32;
  Tensor x = Tensor::empty_host(DType::kFloat32, {numel});
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  float* xp = x.data_ptr<float>();
  for (int64_t i = 0; i < numel; ++i) xp[i] = nd(rng);
  const size_t bytes = static_cast<size_t>(numel) * 4;

  std::unique_ptr<tensord::ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<tensord::ThreadPool>(threads);
  tensord::OpContext ctx;
  ctx.pool = pool.get();

  Tensor copy = Tensor::empty_host(DType::kFloat32, {numel});
  const double t_copy = median_s(reps, [&] {
    ctx.parallel_for(numel, int64_t{1} << 18, [&](int64_t b, int64_t e) {
      std::memcpy(copy.data_ptr<float>() + b, xp + b, static_cast<size_t>(e - b) * 4);
    });
  });
  const double copy_gbs = static_cast<double>(bytes) / t_copy / 1e9;
  std::printf("{\"what\": \"memcpy\", \"bytes\": %zu, \"threads\": %d, \"gb_s\": %.2f}\n", bytes, threads, copy_gbs);

  struct Fmt {
    const char* name;
    MxFormat f;
    int bits;
  };
  const Fmt fmts[] = {{"mxfp8_e4m3", MxFormat::kFp8E4M3, 8},
                      {"mxfp8_e5m2", MxFormat::kFp8E5M2, 8},
                      {"mxfp6_e2m3", MxFormat::kFp6E2M3, 6},
                      {"mxfp6_e3m2", MxFormat::kFp6E3M2, 6},
                      {"mxfp4_e2m1", MxFormat::kFp4E2M1, 4}};
  tensord::MxLayout l;
  l.len = numel;
  l.block = 32;
  for (const Fmt& f : fmts) {
    Tensor el = Tensor::empty_host(DType::kUInt8, {numel * f.bits / 8});
    Tensor sc = Tensor::empty_host(DType::kFloat8E8M0FNU, {numel / 32});
    Tensor out = Tensor::empty_host(DType::kFloat32, {numel});
    for (auto [rname, r] : {std::pair{"floor", MxScaleRounding::kFloor}, std::pair{"rceil", MxScaleRounding::kRceil}}) {
      for (auto [iname, isa] :
           {std::pair{"portable", tensord::MxIsa::kPortable}, std::pair{"avx2", tensord::MxIsa::kAvx2}}) {
        if (isa == tensord::MxIsa::kAvx2 && !tensord::mx_avx2_supported()) continue;
        const double tq = median_s(reps, [&] { tensord::mx_quantize_cpu(ctx, x, f.f, r, l, el, sc, isa); });
        const double gq = static_cast<double>(bytes) / tq / 1e9;
        std::printf(
            "{\"what\": \"quantize\", \"isa\": \"%s\", \"format\": \"%s\", \"rounding\": \"%s\", \"gb_s\": %.2f, "
            "\"of_memcpy\": %.2f}\n",
            iname, f.name, rname, gq, gq / copy_gbs);
      }
    }
    const double td = median_s(reps, [&] { tensord::mx_dequantize_cpu(ctx, el, sc, f.f, l, out); });
    const double gd = static_cast<double>(bytes) / td / 1e9;
    std::printf("{\"what\": \"dequantize\", \"format\": \"%s\", \"gb_s\": %.2f, \"of_memcpy\": %.2f}\n", f.name, gd,
                gd / copy_gbs);
    // mx_dequantize_range in runs of 256 (how matmul reads an MX operand's panels).
    const double tr = median_s(reps, [&] {
      for (int64_t i = 0; i < numel; i += 256) {
        tensord::mx_dequantize_range(el.data_ptr<uint8_t>(), static_cast<const uint8_t*>(sc.data()), f.f, l, i,
                                     std::min<int64_t>(256, numel - i), out.data_ptr<float>() + i);
      }
    });
    const double gr = static_cast<double>(bytes) / tr / 1e9;
    std::printf("{\"what\": \"dequantize_range256\", \"format\": \"%s\", \"gb_s\": %.2f, \"of_memcpy\": %.2f}\n",
                f.name, gr, gr / copy_gbs);
  }
  // matmul with an MX right operand (ops/cpu/matmul_mx.cpp) against
  // dequantize-then-matmul and the float32 matmul, x [M, K] @ w [K, N].
  const int64_t M = 64, K = 1024, N = 1024;
  Tensor xm = Tensor::empty_host(DType::kFloat32, {M, K});
  Tensor wm = Tensor::empty_host(DType::kFloat32, {K, N});
  for (int64_t i = 0; i < M * K; ++i) xm.data_ptr<float>()[i] = nd(rng);
  for (int64_t i = 0; i < K * N; ++i) wm.data_ptr<float>()[i] = nd(rng);
  tensord::set_blas_single_threaded();
  const double t_f32 = median_s(reps, [&] { tensord::matmul_cpu(ctx, xm, wm); });
  std::printf("{\"what\": \"matmul_f32\", \"mkn\": [%lld, %lld, %lld], \"ms\": %.3f}\n", static_cast<long long>(M),
              static_cast<long long>(K), static_cast<long long>(N), t_f32 * 1e3);
  for (const Fmt& f : {fmts[0], fmts[4]}) {
    for (int64_t axis : {0, -1}) {
      auto meta = tensord::make_mx_meta(f.f, 32, axis, {K, N}, false, "bench");
      Tensor q = tensord::mx_empty_host(meta);
      Tensor qe = tensord::mx_elements(q), qs = tensord::mx_scale(q);
      tensord::mx_quantize_cpu(ctx, wm, f.f, MxScaleRounding::kRceil, tensord::mx_layout_of(*meta), qe, qs);
      const double t_fused = median_s(reps, [&] { tensord::matmul_mx_cpu(ctx, xm, q); });
      Tensor deq = Tensor::empty_host(DType::kFloat32, {K, N});
      const double t_unfused = median_s(reps, [&] {
        tensord::mx_dequantize_cpu(ctx, qe, qs, f.f, tensord::mx_layout_of(*meta), deq);
        tensord::matmul_cpu(ctx, xm, deq);
      });
      std::printf(
          "{\"what\": \"matmul_mx\", \"format\": \"%s\", \"axis\": %lld, \"fused_ms\": %.3f, \"unfused_ms\": %.3f}\n",
          f.name, static_cast<long long>(axis), t_fused * 1e3, t_unfused * 1e3);
    }
  }
  return 0;
}
