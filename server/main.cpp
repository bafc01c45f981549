// tensord: the server binary. Parses flags, picks the backend, restores the
// state dir, serves until SIGTERM/SIGINT, drains, checkpoints, exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "api/checkpoint.h"
#include "api/config_json.h"
#include "metrics/metrics.h"
#include "metrics/trace_buffer.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/tenant.h"
#include "scheduler/job_table.h"
#include "scheduler/tenant_registry.h"
#include "server/app.h"
#include "server/config_reloader.h"
#include "server/http_server.h"
#include "server/stream_service.h"

#ifndef TENSORD_VERSION
#define TENSORD_VERSION "0.0.0"
#endif

namespace {

const char* kUsage =
    "usage: tensord [flags]\n"
    "  --listen HOST:PORT        address to serve (default 127.0.0.1:8080; port 0 = any free port)\n"
    "  --backend auto|cpu|cuda   compute backend (default auto: cuda when a device answers and the\n"
    "                            CUDA backend runs the core ops, else cpu)\n"
    "  --threads N               CPU cores to split among the partitions (default: all)\n"
    "  --workqueue-limit N       without --config: jobs run at once on the default partition (default 2)\n"
    "  --io-threads N            HTTP threads (default max(2, cores))\n"
    "  --max-body-bytes N        largest request body (default 1073741824)\n"
    "  --config FILE             partitions and tenants (JSON, API.md section 9); without it one\n"
    "                            anonymous tenant 'default' is served, on loopback addresses only\n"
    "                            (SIGHUP re-reads it: tenants, quotas and limits change live)\n"
    "  --state-dir DIR           keep stored tensors there (restored at start, saved at exit)\n"
    "  --drain-timeout S         seconds to finish in-flight requests on SIGTERM (default 30)\n"
    "  --metrics on|off          record Prometheus metrics (default on); off: /metrics has only\n"
    "                            tensord_build_info and process_*, to measure recording's cost\n"
    "  --trace on|off            record /v1/trace spans (default on); off: /v1/trace is empty\n"
    "  --version                 print the version\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "tensord: " << msg << "\n" << kUsage;
  std::exit(2);
}

long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno || !end || *end || v.empty() || x < lo || x > hi) usage_error(flag + ": bad value '" + v + "'");
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tensord;
  install_reload_signal_handler();  // SIGHUP reloads --config instead of ending the process
  ServerOptions sopt;
  std::string backend_name = "auto", state_dir, config_path;
  int threads = 0, workqueue_limit = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      auto eq = a.find('=');
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    std::string flag = a.substr(0, a.find('='));
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (flag == "--version") {
      std::cout << "tensord " << TENSORD_VERSION << "\n";
      return 0;
    } else if (flag == "--listen") {
      std::string v = value();
      auto colon = v.rfind(':');
      if (colon == std::string::npos) usage_error("--listen takes HOST:PORT");
      sopt.host = v.substr(0, colon);
      if (sopt.host.size() > 2 && sopt.host.front() == '[' && sopt.host.back() == ']') {
        sopt.host = sopt.host.substr(1, sopt.host.size() - 2);
      }
      sopt.port = static_cast<uint16_t>(parse_int("--listen", v.substr(colon + 1), 0, 65535));
    } else if (flag == "--backend") {
      backend_name = value();
    } else if (flag == "--threads") {
      threads = static_cast<int>(parse_int(flag, value(), 0, 1024));
    } else if (flag == "--workqueue-limit") {
      workqueue_limit = static_cast<int>(parse_int(flag, value(), 1, 1024));
    } else if (flag == "--io-threads") {
      sopt.io_threads = static_cast<int>(parse_int(flag, value(), 0, 1024));
    } else if (flag == "--max-body-bytes") {
      sopt.max_body_bytes = static_cast<size_t>(parse_int(flag, value(), 1, 1LL << 40));
    } else if (flag == "--state-dir") {
      state_dir = value();
    } else if (flag == "--drain-timeout") {
      sopt.drain_timeout = std::chrono::seconds(parse_int(flag, value(), 0, 86400));
    } else if (flag == "--config") {
      config_path = value();
    } else if (flag == "--metrics") {
      std::string v = value();
      if (v != "on" && v != "off") usage_error("--metrics must be on or off, got '" + v + "'");
      sopt.record_metrics = v == "on";
    } else if (flag == "--trace") {
      std::string v = value();
      if (v != "on" && v != "off") usage_error("--trace must be on or off, got '" + v + "'");
      TraceBuffer::global().set_enabled(v == "on");
    } else {
      usage_error("unknown flag " + a);
    }
  }

  ServerConfig config;
  if (config_path.empty()) {
    config = default_config(workqueue_limit);
    const std::string& h = sopt.host;
    bool loopback = h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
    if (!loopback) usage_error("without --config the server has no authentication and listens on loopback only");
  } else {
    try {
      config = load_config_file(config_path);
    } catch (const Error& e) {
      std::cerr << "tensord: " << e.message() << "\n";
      return 2;
    }
  }

  std::unique_ptr<Backend> backend;
  if (backend_name == "auto") {
    // CUDA when a device answers and the CUDA backend runs the core op set
    // (ops it lacks run on their CPU kernels beside it).
    backend = make_backend("cuda", 1);
    if (backend && !(backend->supports_op("add") && backend->supports_op("matmul"))) backend.reset();
    if (!backend) backend = make_backend("cpu", 1);
  } else if (backend_name == "cpu" || backend_name == "cuda") {
    // The CPU backend's own pool stays empty: each partition has its pool.
    backend = make_backend(backend_name, 1);
    if (!backend) {
      std::cerr << "tensord: backend " << backend_name << " is not available (not compiled in, or no device)\n";
      return 2;
    }
  } else {
    usage_error("--backend must be auto, cpu or cuda");
  }
  const std::string bname(backend->name());
  register_build_info(TENSORD_VERSION, bname);

  try {
    EngineOptions eopt;
    eopt.cores = threads;  // cores split among the partitions (0: all)
    eopt.metrics = sopt.record_metrics;
    Engine engine(std::move(backend), config, eopt);
    TenantRegistry tenants(config);
    if (!state_dir.empty()) {
      for (Tenant* t : tenants.all()) {
        int64_t n = restore_checkpoint(state_dir, *t);
        if (n) std::cerr << "tensord: restored " << n << " tensors of " << t->name << " from " << state_dir << "\n";
      }
    }
    AppContext app;
    app.engine = &engine;
    app.tenants = &tenants;
    JobTable jobs;
    app.jobs = &jobs;
    app.version = TENSORD_VERSION;
    app.state_dir = state_dir;
    app.max_body_bytes = sopt.max_body_bytes;
    auto router = build_router(app);
    HttpServer server(sopt, router);
    app.draining = [&server] { return server.draining(); };
    server.set_on_drain([&engine] { engine.shutdown(); });
    server.set_stream_service(std::make_shared<StreamService>(&engine, &tenants));
    std::string host = sopt.host.find(':') != std::string::npos ? "[" + sopt.host + "]" : sopt.host;
    std::cerr << "tensord " << TENSORD_VERSION << " (" << bname << ") listening on http://" << host << ":"
              << server.port() << std::endl;
    // SIGHUP: re-read --config (server/config_reloader.h).
    auto reloader = std::make_unique<ReloadSignalWatcher>(
        [target = ReloadTarget{config_path, state_dir, &engine, &tenants}] { reload_config(target); });
    server.run();
    reloader.reset();
    engine.shutdown();
    if (!state_dir.empty()) {
      for (Tenant* t : tenants.all_with_retired()) {  // tenants removed by a reload keep their tensors
        auto ci = write_checkpoint(state_dir, *t);
        std::cerr << "tensord: checkpointed " << ci.tensors << " tensors to " << ci.path << "\n";
      }
    }
    std::cerr << "tensord: stopped\n";
  } catch (const Error& e) {
    std::cerr << "tensord: " << e.message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tensord: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
