// tensord: the server binary. Parses flags, picks the backend, restores the
// state dir, serves until SIGTERM/SIGINT, drains, checkpoints, exits 0.
#include <algorithm>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "api/config_json.h"
#include "metrics/metrics.h"
#include "metrics/trace_buffer.h"
#include "ops/backend.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/graph_service.h"
#include "scheduler/tenant.h"
#include "scheduler/job_table.h"
#include "scheduler/tenant_registry.h"
#include "metrics/log.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/checkpointer.h"
#include "server/shutdown_watchdog.h"
#include "server/flight_recorder_files.h"
#include "server/spmd_peers_http.h"
#include "ops/dist/store.h"
#if defined(TENSORD_HAVE_NCCL)
#include "ops/dist/nccl/nccl_process_group.h"
#endif
#include "server/config_reloader.h"
#include "server/shm_registry.h"
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
    "  --io-timeout S            seconds a request's headers may take, and the longest pause\n"
    "                            while a body or a response streams (default 30)\n"
    "  --config FILE             partitions and tenants (JSON, API.md section 9); without it one\n"
    "                            anonymous tenant 'default' is served, on loopback addresses only\n"
    "                            (SIGHUP re-reads it: tenants, quotas and limits change live)\n"
    "  --state-dir DIR           keep stored tensors there (restored at start, saved at exit,\n"
    "                            on POST /v1/checkpoint and every --checkpoint-every seconds)\n"
    "  --checkpoint-every S      seconds between checkpoints of changed tenants (default 60; 0 = off)\n"
    "  --drain-timeout S         on SIGTERM, seconds running jobs may finish before they are\n"
    "                            cancelled (default 30); a second SIGTERM cancels at once\n"
    "  --log-format text|json    stderr log lines as text or one JSON object each (default text)\n"
    "  --log-level L             debug|info|warn|error (default info)\n"
    "  --metrics on|off          record Prometheus metrics (default on); off: /metrics has only\n"
    "                            tensord_build_info and process_*, to measure recording's cost\n"
    "  --trace on|off            record /v1/trace spans (default on); off: /v1/trace is empty\n"
    "  --ranks R                 local ranks for SPMD requests (API.md 8; CPU rank workers over\n"
    "                            Gloo on loopback; CUDA: rank r on GPU r over NCCL, at most the\n"
    "                            visible GPUs; default 1)\n"
    "  --collective-timeout S    seconds a collective may take before its request fails 504\n"
    "                            (default 60)\n"
    "  --flight-recorder-entries N  collectives each rank's flight recorder keeps (default 2048); a\n"
    "                            collective timeout writes them to <state-dir>/flight-recorder/rank_<g>\n"
    "                            (python -m torch.distributed.flight_recorder.fr_trace\n"
    "                            <state-dir>/flight-recorder --prefix rank_) and flight-recorder-rank<g>.json\n"
    "  --rendezvous URL          redis://HOST:PORT or file:///DIR: where the servers of a world meet\n"
    "  --world-size N            ranks in the whole world (default: --ranks)\n"
    "  --rank-offset K           this server's first global rank (default 0; 0 coordinates)\n"
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
  // Large buffers (request bodies, tensors, encoded responses) come from
  // mmap and go back to the system when freed. With glibc's default the
  // threshold rises to 32 MiB after the first large free, and freed bodies
  // then stay in the handler threads' arenas: RSS grew 2x over a load test
  // while the stored bytes stayed put (bench/load.py).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  install_reload_signal_handler();  // SIGHUP reloads --config instead of ending the process
  ServerOptions sopt;
  std::string backend_name = "auto", state_dir, config_path;
  int threads = 0, workqueue_limit = 2, ranks = 1, world_size = 0, rank_offset = 0;
  std::string rendezvous;
  std::chrono::seconds collective_timeout{60};
  size_t flight_recorder_entries = 2048;
  std::chrono::seconds checkpoint_every{60};
  log::Format log_format = log::Format::kText;
  log::Level log_level = log::Level::kInfo;
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
    } else if (flag == "--io-timeout") {
      sopt.header_timeout = std::chrono::seconds(parse_int(flag, value(), 1, 3600));
    } else if (flag == "--max-body-bytes") {
      sopt.max_body_bytes = static_cast<size_t>(parse_int(flag, value(), 1, 1LL << 40));
    } else if (flag == "--state-dir") {
      state_dir = value();
    } else if (flag == "--checkpoint-every") {
      checkpoint_every = std::chrono::seconds(parse_int(flag, value(), 0, 86400 * 365));
    } else if (flag == "--log-format") {
      std::string v = value();
      if (!log::parse_format(v, log_format)) usage_error("--log-format must be text or json, got '" + v + "'");
    } else if (flag == "--log-level") {
      std::string v = value();
      if (!log::parse_level(v, log_level))
        usage_error("--log-level must be debug, info, warn or error, got '" + v + "'");
    } else if (flag == "--drain-timeout") {
      sopt.drain_timeout = std::chrono::seconds(parse_int(flag, value(), 0, 86400));
    } else if (flag == "--ranks") {
      ranks = static_cast<int>(parse_int(flag, value(), 1, 64));
    } else if (flag == "--collective-timeout") {
      collective_timeout = std::chrono::seconds(parse_int(flag, value(), 1, 86400));
    } else if (flag == "--flight-recorder-entries") {
      flight_recorder_entries = static_cast<size_t>(parse_int(flag, value(), 1, 1 << 20));
    } else if (flag == "--rendezvous") {
      rendezvous = value();
    } else if (flag == "--world-size") {
      world_size = static_cast<int>(parse_int(flag, value(), 1, 4096));
    } else if (flag == "--rank-offset") {
      rank_offset = static_cast<int>(parse_int(flag, value(), 0, 4095));
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

  log::configure(log_format, log_level);
  // A world across servers (API.md 8): where they meet, and which ranks are ours.
  std::function<std::shared_ptr<gloo::rendezvous::Store>()> make_store;
  if (world_size == 0) world_size = ranks;
  if (rank_offset + ranks > world_size) {
    usage_error("--rank-offset " + std::to_string(rank_offset) + " + --ranks " + std::to_string(ranks) +
                " exceeds --world-size " + std::to_string(world_size));
  }
  if (!rendezvous.empty()) {
    if (rendezvous.rfind("redis://", 0) == 0) {
      std::string hp = rendezvous.substr(8);
      if (!hp.empty() && hp.back() == '/') hp.pop_back();
      const auto colon = hp.rfind(':');
      if (colon == std::string::npos || colon == 0) usage_error("--rendezvous redis://HOST:PORT");
      const std::string rhost = hp.substr(0, colon);
      const int rport = static_cast<int>(parse_int("--rendezvous", hp.substr(colon + 1), 1, 65535));
      make_store = [rhost, rport] { return dist::make_redis_store(rhost, rport); };
    } else if (rendezvous.rfind("file://", 0) == 0 && rendezvous.size() > 7) {
      const std::string dir = rendezvous.substr(7);
      make_store = [dir] { return dist::make_file_store(dir); };
    } else {
      usage_error("--rendezvous takes redis://HOST:PORT or file:///DIR, got '" + rendezvous + "'");
    }
    try {
      make_store();  // reachable now, or the server does not start
    } catch (const std::exception& e) {
      log::error("--rendezvous " + rendezvous + " is not reachable", {{"error", std::string(e.what())}});
      return 2;
    }
  } else if (world_size != ranks) {
    usage_error("a world larger than this server's ranks needs --rendezvous");
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
      log::error("bad --config", {{"path", config_path}, {"error", e.message()}});
      return 2;
    }
  }

  std::unique_ptr<Backend> backend;
  if (backend_name == "auto") {
    // CUDA when a device answers, the build's kernels run on it (its compute
    // capability is in the built architecture list) and the CUDA backend
    // runs the core op set (ops it lacks run on their CPU kernels beside it).
    std::string why_not;
    backend = make_backend("cuda", 1, &why_not);
    if (backend && !(backend->supports_op("add") && backend->supports_op("matmul"))) {
      backend.reset();
      why_not = "the CUDA backend lacks add or matmul";
    }
    if (!backend) {
      // Only worth a line where CUDA was compiled in: a CPU-only build has nothing to say.
      const auto compiled = compiled_backends();
      if (std::find(compiled.begin(), compiled.end(), "cuda") != compiled.end()) {
        log::warn("--backend auto: serving on the CPU", {{"reason", why_not}});
      }
      backend = make_backend("cpu", 1);
    }
  } else if (backend_name == "cpu" || backend_name == "cuda") {
    // The CPU backend's own pool stays empty: each partition has its pool.
    std::string why_not;
    backend = make_backend(backend_name, 1, &why_not);
    if (!backend) {
      log::error("backend " + backend_name + " is not available", {{"reason", why_not}});
      return 2;
    }
  } else {
    usage_error("--backend must be auto, cpu or cuda");
  }
  const std::string bname(backend->name());
  register_build_info(TENSORD_VERSION, bname);
  // CUDA: one GPU per local rank (API.md 8).
  if (bname == "cuda" && static_cast<size_t>(ranks) > backend->devices().size()) {
    log::error("--ranks " + std::to_string(ranks) + " needs one GPU per rank on the CUDA backend",
               {{"visible_gpus", static_cast<int64_t>(backend->devices().size())}});
    return 2;
  }
  [[maybe_unused]] Backend* const backend_raw = backend.get();  // the engine owns it from here

  try {
    EngineOptions eopt;
    eopt.cores = threads;  // cores split among the partitions (0: all)
    eopt.metrics = sopt.record_metrics;
    eopt.ranks = ranks;
    eopt.collective_timeout = collective_timeout;
    eopt.flight_recorder_entries = flight_recorder_entries;
    eopt.world_size = world_size;
    eopt.rank_offset = rank_offset;
    eopt.make_store = make_store;
#if defined(TENSORD_HAVE_NCCL)
    // The ranks' collectives on GPUs (API.md 8: NCCL on CUDA, Gloo on CPU).
    if (bname == "cuda") eopt.rank_groups = dist::nccl_group_factory(backend_raw);
#endif
    const bool any_host = sopt.host == "0.0.0.0" || sopt.host == "::" || sopt.host == "localhost";
    eopt.rank_hostname = any_host ? "127.0.0.1" : sopt.host;
    // API.md 8: a collective that timed out leaves the flight recorders in
    // the state dir, replaced each time: PyTorch's pickle files for fr_trace
    // (flight-recorder/rank_<g>) and JSON (server/flight_recorder_files.h).
    Engine* engine_ptr = nullptr;
    if (!state_dir.empty()) {
      eopt.on_collective_timeout = [&engine_ptr, state_dir] {
        if (engine_ptr) write_flight_recorders(engine_ptr->ranks(), state_dir);
      };
    }
    Engine engine(std::move(backend), config, eopt);
    engine_ptr = &engine;
    TenantRegistry tenants(config);
    Checkpointer checkpointer(state_dir, &tenants);
    for (Tenant* t : tenants.all()) checkpointer.restore(*t);  // a corrupt file is logged and skipped
    AppContext app;
    app.engine = &engine;
    app.tenants = &tenants;
    JobTable jobs;
    app.jobs = &jobs;
    GraphService graphs(engine);
    app.graphs = &graphs;
    ShmRegistry shm;  // regions are closed at shutdown, with it
    app.shm = &shm;
    app.version = TENSORD_VERSION;
    app.checkpointer = &checkpointer;
    app.max_body_bytes = sopt.max_body_bytes;
    auto router = build_router(app);
    HttpServer server(sopt, router);
    app.draining = [&server] { return server.draining(); };
    // The shutdown of API.md 10. The hooks run on the server's control
    // strand and never block: new jobs are refused at once, running ones
    // get --drain-timeout, then are cancelled at their next node boundary
    // (their clients get 503).
    ShutdownWatchdog watchdog(sopt.drain_timeout + HttpServer::kCancelGrace, checkpointer);
    server.set_drain_hooks(HttpServer::DrainHooks{
        [&engine, &watchdog] {
          watchdog.arm();
          engine.begin_drain();
        },
        [&engine] { return engine.running_jobs(); },
        [&engine] { engine.cancel_running(Error(ErrorCode::kUnavailable, "server is shutting down")); }});
    // A request's decoding and encoding (what the handler pool would do
    // for it) runs on its tenant's partition's cores: a lane per partition
    // (HttpServer::set_lanes). With one partition there is no
    // other tenant's core to keep it off: the shared pool (32 threads)
    // serves, as before.
    if (config.partitions.size() > 1) {
      std::map<std::string, HttpServer::Lane> lanes;
      for (const auto& p : config.partitions) {
        HttpServer::Lane lane;
        lane.cpus = engine.partition_cpus(p.name);
        lane.threads = std::clamp(2 * static_cast<int>(lane.cpus.size()), 2, 16);
        lanes.emplace(p.name, std::move(lane));
      }
      server.set_lanes(lanes);
    }
    // Who sent a request, once per request: its lane, the account a tensor
    // upload counts against as it arrives (its tenant's memory quota), and
    // the tenant its routes serve.
    server.set_callers(
        [&tenants](std::string_view authorization) {
          return std::make_shared<const Caller>(resolve_caller(authorization, tenants));
        },
        [&tenants] { return tenants.generation(); });
    server.set_stream_service(std::make_shared<StreamService>(&engine, &tenants));
    std::string host = sopt.host.find(':') != std::string::npos ? "[" + sopt.host + "]" : sopt.host;
    // The line scripts wait for ends with the URL (they split it off the
    // line); written whatever --log-level says, so they always find it.
    log::write(log::Level::kInfo, "tensord " TENSORD_VERSION " (" + bname + ") listening on http://" + host + ":" +
                                      std::to_string(server.port()));
    if (make_store) {
      // Our ranks' URL for the world's coordinator (server/spmd_peers_http.h).
      auto peers = std::make_shared<SpmdPeersHttp>(make_store, std::chrono::seconds(5));
      if (auto failed =
              peers->register_ranks("http://" + host + ":" + std::to_string(server.port()), rank_offset, ranks)) {
        log::warn("rank addresses not written to the rendezvous store yet (tried again every 2 s)",
                  {{"error", failed->message()}});
      }
      engine.set_spmd_peers(peers);
    }
    log::info("serving", {{"backend", bname},
                          {"partitions", config.partitions.size()},
                          {"tenants", config.tenants.size()},
                          {"state_dir", state_dir},
                          {"checkpoint_every_s", state_dir.empty() ? 0 : checkpoint_every.count()},
                          {"drain_timeout_s", static_cast<int64_t>(sopt.drain_timeout.count())}});
    checkpointer.start_timer(checkpoint_every);
    // Memory gauges read the accounts at each scrape: bytes are freed
    // wherever a tensor dies (a DELETE, a reply sent, a job result expiring).
    ScrapeHook memory_gauges([&engine, &tenants] {
      for (Tenant* t : tenants.all_with_retired()) engine.record_tenant_memory(*t);
      engine.record_device_memory();
    });
    // SIGHUP: re-read --config (server/config_reloader.h).
    auto reloader = std::make_unique<ReloadSignalWatcher>(
        [target = ReloadTarget{config_path, &checkpointer, &engine, &tenants, [&shm](const std::string& removed) {
                                 shm.remove_all(removed);
                               }}] { reload_config(target); });
    server.run();
    reloader.reset();
    checkpointer.stop_timer();
    // Whatever still runs was cancelled by the drain (or the server was
    // stopped by a third signal): ask again, then checkpoint what is stored.
    engine.begin_drain();
    engine.cancel_running(Error(ErrorCode::kUnavailable, "server is shutting down"));
    if (watchdog.begin_final_checkpoint()) {
      const int failed = checkpointer.write_all("shutdown");
      if (failed) log::error("shutdown checkpoint failed for some tenants", {{"tenants", failed}});
      watchdog.end_final_checkpoint();
    }
    // A job stuck inside one long kernel cannot stop at a node boundary:
    // the process does not wait for it.
    for (int i = 0; i < 100 && engine.running_jobs() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (engine.running_jobs() > 0) {
      log::warn("exiting with jobs still inside a kernel", {{"jobs", engine.running_jobs()}});
      ShutdownWatchdog::exit_now(0);
    }
    engine.shutdown();
    log::info("stopped");
  } catch (const Error& e) {
    log::error(e.message());
    return 1;
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
  return 0;
}
