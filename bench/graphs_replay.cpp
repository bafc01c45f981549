// Graph replay without the server: a captured graph's ReplayPlan against
// execute_program (what /v1/run runs after compiling) and against the same
// kernels called back to back through their entry points over prebuilt
// arguments and outputs (no executor; each call still dispatches on dtype,
// plans its broadcast and builds its result vector), on bench/graphs.py's
// 200-node program and on chains of 100 and 400 `neg` on float32[16]. The
// plan's runs after the first call the loops it recorded (ops/recorded_block.h),
// so it beats the kernel calls; "recorded" counts those nodes. Prints a
// markdown table (bench/graphs.py shows it).
//
//   graphs_replay_bench [--reps 9] [--runs 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "graphs/compiled_program.h"
#include "graphs/executor.h"
#include "graphs/graph_pool.h"
#include "graphs/replay_plan.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/graph_hooks.h"
#include "ops/memory_account.h"
#include "tests/unit/graphs/program_builder.h"

using namespace tensord;
using namespace tensord::testing_util;

namespace {

struct Builder {
  Program p;
  int k = 0;
  std::string add(const std::string& op, std::vector<ArgExpr> args) {
    const std::string out = "v" + std::to_string(k);
    p.nodes.push_back(node("n" + std::to_string(k++), op, std::move(args), {out}));
    return out;
  }
};

// bench/graphs.py's program_200(), node for node.
Program program_200(int64_t n) {
  Builder b;
  b.p.inputs.push_back({"x", TensorMeta{DType::kFloat32, {n}}});
  std::string cur = "x", red;
  const std::vector<std::function<std::string(const std::string&)>> cycle = {
      [&](const std::string& v) {
        return b.add("mul", {ref(v), lit(0.999)});
      },
      [&](const std::string& v) {
        return b.add("add", {ref(v), lit(0.01)});
      },
      [&](const std::string& v) { return b.add("tanh", {ref(v)}); },
      [&](const std::string& v) {
        return b.add("sub", {ref(v), ref("x")});
      },
      [&](const std::string& v) {
        return b.add("maximum", {ref(v), ref("x")});
      },
      [&](const std::string& v) { return b.add("neg", {ref(v)}); },
      [&](const std::string& v) { return b.add("abs", {ref(v)}); }};
  const char* reds[] = {"sum", "mean", "amax"};
  size_t i = 0;
  while (b.k < 200) {
    if (b.k % 20 == 18) {
      red = b.add(reds[(b.k / 20) % 3], {ref(cur)});
      cur = b.add("add", {ref(cur), ref(red)});
      continue;
    }
    cur = cycle[i++ % cycle.size()](cur);
  }
  b.p.outputs = {cur, red};
  return b.p;
}

Program neg_chain(int nodes, int64_t n) {
  Builder b;
  b.p.inputs.push_back({"x", TensorMeta{DType::kFloat32, {n}}});
  std::string cur = "x";
  for (int i = 0; i < nodes; ++i) cur = b.add("neg", {ref(cur)});
  b.p.outputs = {cur};
  return b.p;
}

Tensor filled(const TensorMeta& m, float v) {
  Tensor t = Tensor::empty_host(m.dtype, m.shape);
  if (m.dtype == DType::kFloat32) std::fill_n(t.data_ptr<float>(), t.numel(), v);
  return t;
}

// Median over `reps` of the mean microseconds of `runs` calls.
double time_us(int reps, int runs, const std::function<void()>& f) {
  for (int i = 0; i < runs / 4 + 1; ++i) f();
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) f();
    s.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / runs);
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

// The kernel calls: every node's kernel over prebuilt arguments and output
// buffers, no executor (what a plan without recorded loops pays).
struct KernelsAlone {
  std::vector<OpArgs<Tensor>> args;
  std::vector<const KernelFn*> kernels;
  std::vector<std::vector<Tensor>> outs;
  KernelsAlone(const CompiledProgram& cp, const Tensor& x) {
    std::vector<Tensor> vals(cp.values.size());
    for (size_t v = 0; v < cp.values.size(); ++v) {
      vals[v] = cp.constants[v].defined() ? cp.constants[v] : filled(cp.values[v].meta, 0.5f);
    }
    vals[static_cast<size_t>(cp.inputs[0].second)] = x;
    for (const BoundNode& b : cp.nodes) {
      args.push_back(bind_node_args<Tensor>(b, [&vals](size_t v) { return vals[v]; }));
      kernels.push_back(&b.op->kernels.at("cpu"));
      std::vector<Tensor> o;
      for (int v : b.outputs) o.push_back(vals[static_cast<size_t>(v)]);
      outs.push_back(std::move(o));
    }
  }
  void run(OpContext ctx) {
    OutputSlots slots;
    GraphHooks hooks;
    hooks.out_slots = &slots;
    ctx.graph = &hooks;
    for (size_t i = 0; i < args.size(); ++i) {
      slots = OutputSlots{outs[i].data(), outs[i].size(), 0};
      (*kernels[i])(ctx, args[i]);
    }
  }
};

struct Row {
  std::string name;
  int nodes;
  size_t recorded;
  double exec_us, plan_us, plan_cb_us, kernels_us;
};

Row measure(const std::string& name, const Program& p, int reps, int runs, CpuBackend& backend,
            const std::shared_ptr<MemoryAccount>& acct) {
  const TensorMeta xm = p.inputs[0].meta;
  Tensor x = filled(xm, 0.25f);
  auto cp = std::make_shared<const CompiledProgram>(compile_program(p, {{"x", xm}}, nullptr));
  ExecOptions o;
  o.ctx.backend = &backend;
  o.ctx.account = acct;
  o.ctx.pool = &backend.pool();
  std::map<std::string, Tensor> inputs{{"x", x}};
  GraphPool pool(&backend, Device{}, acct);
  std::map<std::string, Tensor> bufs{{"x", Tensor::empty(&backend, Device{}, xm.dtype, xm.shape, acct)}};
  ReplayPlan plan(cp, bufs, pool, &backend, Device{});
  Row r{name, static_cast<int>(cp->nodes.size()), 0, 0, 0, 0, 0};
  r.exec_us = time_us(reps, runs, [&] { execute_program(*cp, inputs, o); });
  r.plan_us = time_us(reps, runs, [&] { plan.run(inputs, o); });
  r.recorded = plan.recorded_instructions();
  ExecOptions ocb = o;
  double sink = 0;
  ocb.on_node = [&sink](const CompiledProgram&, const BoundNode&, double s, std::chrono::steady_clock::time_point,
                        std::string_view) { sink += s; };
  r.plan_cb_us = time_us(reps, runs, [&] { plan.run(inputs, ocb); });
  KernelsAlone k(*cp, x);
  r.kernels_us = time_us(reps, runs, [&] { k.run(o.ctx); });
  if (sink < 0) std::printf("%f", sink);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9, runs = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--reps") reps = std::stoi(argv[i + 1]);
    if (a == "--runs") runs = std::stoi(argv[i + 1]);
  }
  CpuBackend backend(2);
  auto acct = std::make_shared<MemoryAccount>("bench");
  std::vector<Row> rows;
  rows.push_back(measure("200-node program, float32[64]", program_200(64), reps, runs, backend, acct));
  rows.push_back(measure("neg chain, float32[16]", neg_chain(100, 16), reps, runs, backend, acct));
  rows.push_back(measure("neg chain, float32[16]", neg_chain(400, 16), reps, runs / 4 + 1, backend, acct));
  std::printf("C++ (graphs_replay_bench, no server; median of %d x %d runs, us per run):\n\n", reps, runs);
  std::printf(
      "| program | nodes (recorded) | execute_program | replay plan | plan + on_node | kernel calls | "
      "plan per node |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %d (%zu) | %.1f | %.1f | %.1f | %.1f | %.3f us |\n", r.name.c_str(), r.nodes, r.recorded,
                r.exec_us, r.plan_us, r.plan_cb_us, r.kernels_us, r.plan_us / r.nodes);
  }
  const Row& a = rows[1];
  const Row& b = rows[2];
  std::printf(
      "\nslope 100 -> 400 neg nodes: replay plan %.3f us/node, kernel calls %.3f us/node, "
      "execute_program %.3f us/node\n",
      (b.plan_us - a.plan_us) / 300, (b.kernels_us - a.kernels_us) / 300, (b.exec_us - a.exec_us) / 300);
  return 0;
}
