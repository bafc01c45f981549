// Times tensord's CPU eigh kernel directly (no server) and prints one JSON
// line. bench/eigh.py drives it on the same inputs it gives torch and numpy.
//
//   eigh_kernel_bench --n 16 --batch 10000 [--dtype float32] [--input FILE]
//                     [--path auto|lapack|portable|avx2|avx512|tridiag_portable|
//                             tridiag_avx2|tridiag_avx512] [--reps 7]
//                     [--threads 2] [--vectors 1]
//
// FILE holds batch x n x n raw little-endian elements of the dtype (else a
// seeded random symmetric batch). Prints {"median_ms", "min_ms", "path",
// "isa", "max_residual"}: the residual max_b ||A V - V diag(w)||_F / ||A||_F
// is checked on the last run (real dtypes).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/linalg_kernels.h"
#include "ops/cpu/thread_pool.h"
#include "ops/dtype.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

using namespace tensord;

namespace {

template <class R>
double max_residual(const Tensor& a, const Tensor& w, const Tensor& v, int64_t n) {
  const int64_t batch = a.numel() / (n * n);
  const R* A = a.data_ptr<R>();
  const R* W = w.data_ptr<R>();
  const R* V = v.data_ptr<R>();
  double worst = 0;
  for (int64_t b = 0; b < batch; b += std::max<int64_t>(1, batch / 64)) {
    const R* Ab = A + b * n * n;
    const R* Vb = V + b * n * n;
    double res = 0, nrm = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double aij = j <= i ? Ab[i * n + j] : Ab[j * n + i];  // lower triangle
        nrm += aij * aij;
        double s = 0;
        for (int64_t k = 0; k < n; ++k) s += (k <= i ? Ab[i * n + k] : Ab[k * n + i]) * double(Vb[k * n + j]);
        const double r = s - double(Vb[i * n + j]) * W[b * n + j];
        res += r * r;
      }
    }
    worst = std::max(worst, std::sqrt(res) / std::max(std::sqrt(nrm), 1e-300));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 16, batch = 10000;
  int reps = 7, threads = 2;
  bool vectors = true;
  std::string dtype = "float32", path_name = "auto", input;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], val = argv[i + 1];
    if (k == "--n")
      n = std::stoll(val);
    else if (k == "--batch")
      batch = std::stoll(val);
    else if (k == "--dtype")
      dtype = val;
    else if (k == "--path")
      path_name = val;
    else if (k == "--input")
      input = val;
    else if (k == "--reps")
      reps = std::stoi(val);
    else if (k == "--threads")
      threads = std::stoi(val);
    else if (k == "--vectors")
      vectors = val != "0";
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  const DType t = dtype == "float64"      ? DType::kFloat64
                  : dtype == "complex64"  ? DType::kComplex64
                  : dtype == "complex128" ? DType::kComplex128
                                          : DType::kFloat32;
  EighPath path = EighPath::kAuto;
  if (path_name == "lapack") path = EighPath::kLapack;
  if (path_name == "portable") path = EighPath::kJacobiPortable;
  if (path_name == "avx2") path = EighPath::kJacobiAvx2;
  if (path_name == "avx512") path = EighPath::kJacobiAvx512;
  if (path_name == "tridiag_portable") path = EighPath::kTridiagPortable;
  if (path_name == "tridiag_avx2") path = EighPath::kTridiagAvx2;
  if (path_name == "tridiag_avx512") path = EighPath::kTridiagAvx512;
  if (!eigh_path_available(path)) {
    std::printf("{\"error\": \"path %s not available on this CPU\"}\n", path_name.c_str());
    return 0;
  }
  Tensor a = Tensor::empty_host(t, {batch, n, n});
  if (!input.empty()) {
    std::ifstream f(input, std::ios::binary);
    f.read(static_cast<char*>(a.data()), static_cast<std::streamsize>(a.nbytes()));
    if (!f) {
      std::fprintf(stderr, "cannot read %zu bytes from %s\n", a.nbytes(), input.c_str());
      return 2;
    }
  } else {
    std::mt19937 rng(1);
    std::normal_distribution<double> g;
    const int64_t parts = is_complex(t) ? 2 : 1;
    const int64_t elems = a.numel() * parts;
    for (int64_t i = 0; i < elems; ++i) {
      if (t == DType::kFloat32 || t == DType::kComplex64)
        static_cast<float*>(a.data())[i] = static_cast<float>(g(rng));
      else
        static_cast<double*>(a.data())[i] = g(rng);
    }
  }
  ThreadPool pool(threads);
  OpContext ctx;
  ctx.pool = &pool;
  Tensor w = Tensor::empty_host(to_real(t), {batch, n});
  Tensor v = Tensor::empty_host(t, {batch, n, n});
  std::vector<double> ms;
  for (int r = 0; r < reps + 1; ++r) {  // one warm-up
    const auto t0 = std::chrono::steady_clock::now();
    eigh_cpu(ctx, a, 'L', w, vectors ? &v : nullptr, "linalg.eigh", path);
    const auto t1 = std::chrono::steady_clock::now();
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double res = -1;
  if (vectors && t == DType::kFloat32) res = max_residual<float>(a, w, v, n);
  if (vectors && t == DType::kFloat64) res = max_residual<double>(a, w, v, n);
  const char* algo = "jacobi";
  if (path == EighPath::kAuto) {
    const EighAlgorithm a_auto = eigh_auto_algorithm(t, n, batch);
    algo = a_auto == EighAlgorithm::kLapack ? "lapack" : a_auto == EighAlgorithm::kTridiag ? "tridiag" : "jacobi";
  } else if (path == EighPath::kLapack) {
    algo = "lapack";
  } else if (path_name.rfind("tridiag", 0) == 0) {
    algo = is_complex(t) ? "jacobi" : "tridiag";
  }
  const bool lapack = std::string(algo) == "lapack";
  std::printf("{\"median_ms\": %.4f, \"min_ms\": %.4f, \"path\": \"%s\", \"isa\": \"%s\", \"max_residual\": %.3g}\n",
              ms[ms.size() / 2], ms[0], algo,
              lapack                    ? "lapack"
              : path == EighPath::kAuto ? eigh_jacobi_isa_name()
                                        : path_name.c_str(),
              res);
  return 0;
}
