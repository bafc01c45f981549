// optim_kernel_bench: tensord's fused optimizer step at kernel level (the
// registered "cpu" kernel, with its allocation of the new buffers), and the
// machine's copy bandwidth measured in the same run. bench/optim.py runs it
// and sets it against torch; one JSON object per line on stdout.
//
//   optim_kernel_bench [--numel N] [--tensors T] [--reps R] [--threads P] [--mallopt 1] [--serve 1]
//
// --serve 1: no batch run; reads commands from stdin, one a line, and
// answers each with one JSON line: `copy` (the copy bandwidth, median of
// --reps), `step <label>` (one step of that case, its data made on first
// use; another case's is dropped), `quit`. bench/optim.py interleaves
// these with the server's steps, so kernel, server and floor are measured
// in the same few hundred milliseconds of a noisy machine.
//
// Each step allocates its new buffers and frees the old ones (stored tensors
// are immutable values). With glibc's default dynamic mmap threshold, 16 MiB
// buffers often come back as fresh pages, which the kernel faults in and
// zeroes: --mallopt 1 keeps freed memory in the heap (M_MMAP_THRESHOLD and
// M_TRIM_THRESHOLD raised), which is what a caching host allocator would do.
#include <emmintrin.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/optim_loop.h"
#include "ops/cpu/thread_pool.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/op_registry.h"
#include "ops/tensor.h"

namespace {

using tensord::Attr;
using tensord::DType;
using tensord::Tensor;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class MapStore final : public tensord::StoredIO {
 public:
  std::map<std::string, Tensor> m;
  std::optional<Tensor> read(const std::string& n) const override {
    auto it = m.find(n);
    if (it == m.end()) return std::nullopt;
    return it->second;
  }
  void write(const std::string& n, Tensor t) override { m[n] = std::move(t); }
};

// Copy bandwidth, counted as read + write bytes per second, over `threads`
// threads: glibc memcpy and a streaming-store copy; median of `reps`.
double copy_bw(size_t bytes, int threads, int reps, bool streaming) {
  char* a = static_cast<char*>(std::aligned_alloc(64, bytes));
  char* b = static_cast<char*>(std::aligned_alloc(64, bytes));
  std::memset(a, 1, bytes);
  std::memset(b, 2, bytes);
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = now_s();
    std::vector<std::thread> ts;
    const size_t part = bytes / static_cast<size_t>(threads) / 64 * 64;
    for (int k = 0; k < threads; ++k) {
      ts.emplace_back([&, k] {
        char* d = b + part * static_cast<size_t>(k);
        const char* s = a + part * static_cast<size_t>(k);
        if (!streaming) {
          std::memcpy(d, s, part);
          return;
        }
        for (size_t off = 0; off < part; off += 64) {
          for (int q = 0; q < 4; ++q) {
            __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(s + off + 16 * q));
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + off + 16 * q), v);
          }
        }
        _mm_sfence();
      });
    }
    for (auto& th : ts) th.join();
    if (r > 0) t.push_back(now_s() - t0);  // the first run faults the pages in
  }
  std::free(a);
  std::free(b);
  return 2.0 * static_cast<double>(bytes / static_cast<size_t>(threads) / 64 * 64 * static_cast<size_t>(threads)) /
         median(t);
}

struct Case {
  std::string label, op;
  std::vector<std::pair<std::string, Attr>> kwargs;
  int streams;  // 4-byte streams one pass moves per element (reads + writes)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"sgd", "optim.sgd", {{"lr", 1e-3}}, 3},
      {"sgd_momentum", "optim.sgd", {{"lr", 1e-3}, {"momentum", 0.9}, {"state", "s"}}, 5},
      {"adam", "optim.adam", {{"state", "s"}}, 7},
      {"adamw", "optim.adamw", {{"state", "s"}}, 7},
      {"adam_amsgrad", "optim.adam", {{"state", "s"}, {"amsgrad", true}}, 9},
      {"adagrad", "optim.adagrad", {{"state", "s"}}, 5},
  };
  return c;
}

// One case's parameters, gradients, state and kernel arguments.
struct CaseRun {
  MapStore st;
  tensord::OpArgs<Tensor> a;
  tensord::OpContext ctx;
  const tensord::KernelFn* kernel = nullptr;

  CaseRun(const Case& c, int64_t numel, int tensors, tensord::ThreadPool& pool, tensord::CpuBackend* backend) {
    const tensord::OpDef* op = tensord::OpRegistry::global().find(c.op);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int64_t per = numel / tensors;
    a.op = op;
    a.node = "bench";
    a.tensors.resize(op->params.size());
    a.attrs.resize(op->params.size());
    a.names.resize(op->params.size());
    for (size_t i = 0; i < op->params.size(); ++i) a.attrs[i] = op->params[i].default_value;
    for (const auto& [k, v] : c.kwargs) a.attrs[static_cast<size_t>(op->param_index(k))] = v;
    for (int t = 0; t < tensors; ++t) {
      Tensor p = Tensor::empty_host(DType::kFloat32, {per});
      Tensor g = Tensor::empty_host(DType::kFloat32, {per});
      for (int64_t i = 0; i < per; ++i) {
        p.data_ptr<float>()[i] = nd(rng);
        g.data_ptr<float>()[i] = nd(rng);
      }
      const std::string name = "w" + std::to_string(t);
      st.m[name] = p;
      a.tensors[0].push_back(p);
      a.names[0].push_back("$stored/" + name);
      a.tensors[1].push_back(g);
      a.names[1].push_back("g");
    }
    ctx.pool = &pool;
    ctx.backend = backend;
    ctx.stored = &st;
    kernel = &op->kernels.at("cpu");
  }
  CaseRun(const CaseRun&) = delete;
  CaseRun& operator=(const CaseRun&) = delete;

  double step() {
    const double t0 = now_s();
    (*kernel)(ctx, a);
    return now_s() - t0;
  }
};

// stdin commands (see the header); one JSON line per command on stdout.
int serve(int64_t numel, int tensors, int reps, int threads, tensord::CpuBackend* backend) {
  tensord::ThreadPool pool(threads);
  std::unique_ptr<CaseRun> run;
  std::string label;
  char line[256];
  while (std::fgets(line, sizeof line, stdin)) {
    std::string cmd(line);
    while (!cmd.empty() && (cmd.back() == '\n' || cmd.back() == '\r')) cmd.pop_back();
    if (cmd == "quit") break;
    if (cmd == "copy") {
      const size_t bytes = static_cast<size_t>(numel) * 4 * 2;
      std::printf("{\"kind\": \"copy\", \"memcpy_GBps\": %.3f, \"stream_GBps\": %.3f}\n",
                  copy_bw(bytes, threads, reps, false) / 1e9, copy_bw(bytes, threads, reps, true) / 1e9);
    } else if (cmd.rfind("step ", 0) == 0) {
      const std::string want = cmd.substr(5);
      const Case* c = nullptr;
      for (const Case& k : cases()) {
        if (k.label == want) c = &k;
      }
      if (!c) {
        std::printf("{\"kind\": \"error\", \"message\": \"unknown case\"}\n");
      } else {
        if (label != want) {
          run.reset();  // its buffers back before the next case's are made
          run = std::make_unique<CaseRun>(*c, numel, tensors, pool, backend);
          label = want;
        }
        const long f0 = minor_faults();
        const double dt = run->step();
        const int64_t elems = numel / tensors * tensors;
        std::printf(
            "{\"kind\": \"step\", \"optimizer\": \"%s\", \"ms\": %.3f, \"page_faults\": %ld, \"bytes\": %.0f}\n",
            c->label.c_str(), dt * 1e3, minor_faults() - f0,
            static_cast<double>(c->streams) * 4.0 * static_cast<double>(elems));
      }
    } else {
      std::printf("{\"kind\": \"error\", \"message\": \"unknown command\"}\n");
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t numel = 16 << 20;
  int tensors = 4, reps = 7, threads = 2, tuned = 0, serving = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--numel") numel = std::atoll(argv[i + 1]);
    if (k == "--tensors") tensors = std::atoi(argv[i + 1]);
    if (k == "--reps") reps = std::atoi(argv[i + 1]);
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    if (k == "--mallopt") tuned = std::atoi(argv[i + 1]);
    if (k == "--serve") serving = std::atoi(argv[i + 1]);
  }
  // --mallopt 1 now means "allocate as the server does": through the CPU
  // backend, whose block cache hands back mapped buffers of the same size
  // class (ops/cpu/host_block_cache.h); 0 is plain aligned_alloc per step.
  tensord::CpuBackend backend(1);
  if (serving) return serve(numel, tensors, reps, threads, &backend);
  const double bw_memcpy = copy_bw(static_cast<size_t>(numel) * 4 * 2, threads, reps, false);
  const double bw_stream = copy_bw(static_cast<size_t>(numel) * 4 * 2, threads, reps, true);
  std::printf("{\"kind\": \"copy\", \"threads\": %d, \"memcpy_GBps\": %.2f, \"stream_GBps\": %.2f, \"avx2\": %s}\n",
              threads, bw_memcpy / 1e9, bw_stream / 1e9, tensord::optim_loop_uses_avx2() ? "true" : "false");
  std::fflush(stdout);
  const double bw = std::max(bw_memcpy, bw_stream);

  tensord::ThreadPool pool(threads);
  const int64_t per = numel / tensors;
  for (const Case& c : cases()) {
    CaseRun run(c, numel, tensors, pool, tuned ? &backend : nullptr);
    std::vector<double> times;
    long faults = 0;
    for (int r = 0; r < reps + 2; ++r) {  // two warm-up steps: state creation, then steady state
      const long f0 = minor_faults();
      const double dt = run.step();
      if (r >= 2) {
        times.push_back(dt);
        faults += minor_faults() - f0;
      }
    }
    const double t = median(times);
    const double bytes = static_cast<double>(c.streams) * 4.0 * static_cast<double>(per * tensors);
    std::printf(
        "{\"kind\": \"step\", \"mallopt\": %d, \"optimizer\": \"%s\", \"numel\": %lld, \"tensors\": %d, \"ms\": %.3f, "
        "\"min_ms\": %.3f, \"page_faults\": %ld, \"bytes\": %.0f, \"GBps\": %.2f, \"floor_ms\": %.3f, \"vs_floor\": "
        "%.3f}\n",
        tuned, c.label.c_str(), static_cast<long long>(per * tensors), tensors, t * 1e3,
        *std::min_element(times.begin(), times.end()) * 1e3, faults / reps, bytes, bytes / t / 1e9, bytes / bw * 1e3,
        t / (bytes / bw));
    std::fflush(stdout);
  }
  return 0;
}
