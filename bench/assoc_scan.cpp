// associative_scan without the server: the sequential algorithm (n - 1
// combine_fn invocations over slices) against the parallel one
// (Hillis-Steele, one batched invocation per level) through execute_program,
// for a cumsum (combine = add) and an affine-map composition (3 nodes, 2
// inputs) over n float32 scalars, and a cumsum over float32[n, 16]. The
// program's compile includes the batched combine_fn variants (one per
// level): "compile ms". Prints a markdown table.
//
//   assoc_scan_bench [--reps 5] [--threads 2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/control_flow.h"
#include "graphs/control_flow_run.h"
#include "graphs/executor.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/program_builder.h"

using namespace tensord;
using namespace tensord::testing_util;

namespace {

// ys = associative_scan(xs) over k float32 inputs of shape [n] + slice.
Program scan_program(size_t k, const Shape& slice, std::vector<Node> combine, std::vector<std::string> outs) {
  auto sub = std::make_shared<Program>();
  TensorMeta m;
  m.dtype = DType::kFloat32;
  m.shape = slice;
  for (const char* side : {"l", "r"}) {
    for (size_t i = 0; i < k; ++i) sub->inputs.push_back({side + std::to_string(i), m});
  }
  sub->nodes = std::move(combine);
  sub->outputs = std::move(outs);
  Node n;
  n.id = "a";
  n.op = "associative_scan";
  ArgExpr xs;
  xs.kind = ArgExpr::Kind::kStringList;
  Program p;
  for (size_t i = 0; i < k; ++i) {
    xs.strs.push_back("x" + std::to_string(i));
    n.outputs.push_back("y" + std::to_string(i));
  }
  n.args = {xs};
  n.subprograms["combine_fn"] = sub;
  p.nodes.push_back(n);
  p.outputs = n.outputs;
  return p;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Times {
  double seq = 0, compile = 0, par = 0;
  int64_t seq_calls = 0, par_calls = 0;
};

Times measure(const Program& p, size_t k, const Shape& xshape, int reps, const ExecOptions& o) {
  std::map<std::string, TensorMeta> im;
  std::map<std::string, Tensor> in;
  for (size_t i = 0; i < k; ++i) {
    Tensor t = Tensor::empty_host(DType::kFloat32, xshape);
    float* d = t.data_ptr<float>();
    for (int64_t j = 0; j < t.numel(); ++j) d[j] = 1.0f + 1e-4f * static_cast<float>(j % 7);
    im["x" + std::to_string(i)] = t.meta();
    in["x" + std::to_string(i)] = t;
  }
  const auto t0 = std::chrono::steady_clock::now();
  CompiledProgram cp = compile_program(p, im, nullptr);
  const double compile_ms = ms_since(t0);
  const ScanBatching& sc = *cp.nodes.at(0).control->batching;
  auto best = [&](int r) {
    double b = 1e30;
    for (int i = 0; i < r; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      execute_program(cp, in, o);
      b = std::min(b, ms_since(t0));
    }
    return b;
  };
  Times t;
  set_associative_scan_parallel(false);
  t.seq = best(reps);
  t.seq_calls = sc.combine_calls.load() / reps;
  set_associative_scan_parallel(true);
  const int64_t before = sc.combine_calls.load();
  t.compile = compile_ms;
  t.par = best(reps);
  t.par_calls = (sc.combine_calls.load() - before) / reps;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5, threads = 2;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps") reps = std::stoi(argv[i + 1]);
    if (a == "--threads") threads = std::stoi(argv[i + 1]);
  }
  CpuBackend backend(threads);
  auto acct = std::make_shared<MemoryAccount>("bench");
  ExecOptions o;
  o.ctx.backend = &backend;
  o.ctx.account = acct;
  o.ctx.pool = &backend.pool();

  std::printf("| combine | xs | seq calls | seq ms | par calls | compile ms | par ms | speedup |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int64_t n : {1000, 10000}) {
    struct Case {
      const char* name;
      size_t k;
      Shape slice;
      std::vector<Node> combine;
      std::vector<std::string> outs;
    };
    std::vector<Case> cases = {
        {"add (cumsum)", 1, {}, {node("c", "add", {ref("l0"), ref("r0")}, {"o"})}, {"o"}},
        {"affine (3 nodes)",
         2,
         {},
         {node("aa", "mul", {ref("l0"), ref("r0")}, {"a"}), node("ab", "mul", {ref("r0"), ref("l1")}, {"t"}),
          node("bb", "add", {ref("t"), ref("r1")}, {"b"})},
         {"a", "b"}},
        {"add (cumsum)", 1, {16}, {node("c", "add", {ref("l0"), ref("r0")}, {"o"})}, {"o"}},
    };
    for (auto& c : cases) {
      Shape xs = c.slice;
      xs.insert(xs.begin(), n);
      Program p = scan_program(c.k, c.slice, c.combine, c.outs);
      Times t = measure(p, c.k, xs, reps, o);
      std::string shape = "f32[" + std::to_string(n) + (c.slice.empty() ? "" : ", 16") + "]" +
                          (c.k > 1 ? " x" + std::to_string(c.k) : "");
      std::printf("| %s | %s | %lld | %.2f | %lld | %.2f | %.3f | %.0fx |\n", c.name, shape.c_str(),
                  static_cast<long long>(t.seq_calls), t.seq, static_cast<long long>(t.par_calls), t.compile, t.par,
                  t.seq / t.par);
    }
  }
  return 0;
}
