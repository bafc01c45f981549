#include "server/config_reloader.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "server/checkpointer.h"
#include "api/config_json.h"
#include "metrics/log.h"
#include "metrics/metrics.h"
#include "ops/error.h"
#include "scheduler/config_reload.h"
#include "scheduler/engine.h"
#include "scheduler/tenant_registry.h"

namespace tensord {

namespace {
prometheus::Counter& reloads(const std::string& result) {
  static auto& family = prometheus::BuildCounter()
                            .Name("tensord_config_reloads_total")
                            .Help("Config reloads (SIGHUP) by result: ok (applied) or error (running config kept)")
                            .Register(metrics_registry());
  return family.Add({{"result", result}});
}

prometheus::Gauge& last_reload_ok() {
  static auto& family =
      prometheus::BuildGauge()
          .Name("tensord_config_last_reload_successful")
          .Help("1 when the last config reload (SIGHUP) was applied or none was tried, 0 when it failed")
          .Register(metrics_registry());
  return family.Add({});
}

bool failed_reload(const ReloadTarget& target, const std::string& why) {
  reloads("error").Increment();
  last_reload_ok().Set(0);
  log::error("config reload failed, the running config stays in force", {{"path", target.config_path}, {"error", why}});
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "-" : out;
}
}  // namespace

bool reload_config(const ReloadTarget& target) {
  if (target.config_path.empty()) {
    log::warn("SIGHUP: no --config file, nothing to reload");
    return false;
  }
  const ServerConfig running = target.engine->config();
  ReloadPlan plan;
  try {
    plan = plan_reload(running, load_config_file(target.config_path), target.tenants->partitions_by_tenant());
  } catch (const Error& e) {
    return failed_reload(target, e.message());
  } catch (const std::exception& e) {  // e.g. bad_alloc reading an absurd file
    return failed_reload(target, e.what());
  }
  for (const auto& n : plan.notes) log::warn("config reload: " + n);
  TenantRegistry::ReloadResult res;
  try {
    // The scheduler first, so a new tenant's queue exists before its token works.
    target.engine->reload(plan.effective);
    try {
      res = target.tenants->reload(plan.effective, [&target](Tenant& t) {
        // A corrupt checkpoint is skipped and logged, as at start.
        if (target.checkpointer) target.checkpointer->restore(t);
      });
    } catch (...) {
      target.engine->reload(running);  // back to the running config
      throw;
    }
  } catch (const Error& e) {
    return failed_reload(target, e.message());
  } catch (const std::exception& e) {
    return failed_reload(target, e.what());
  }
  for (Tenant* t : target.tenants->all()) target.engine->record_tenant_memory(*t);
  if (target.on_removed) {
    for (const auto& name : res.removed) target.on_removed(name);
  }
  reloads("ok").Increment();
  last_reload_ok().Set(1);
  log::info("config reloaded", {{"path", target.config_path},
                                {"tenants", plan.effective.tenants.size()},
                                {"added", join(res.added)},
                                {"restored", join(res.restored)},
                                {"removed", join(res.removed)}});
  return true;
}

namespace {
int g_reload_pipe[2] = {-1, -1};

extern "C" void on_sighup(int) {
  const int saved = errno;
  const char b = 1;
  ssize_t ignored = write(g_reload_pipe[1], &b, 1);  // full pipe: a reload is pending anyway
  (void)ignored;
  errno = saved;
}
}  // namespace

void install_reload_signal_handler() {
  if (g_reload_pipe[0] >= 0) return;
  if (pipe2(g_reload_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    log::error("cannot create the SIGHUP pipe; config reload is off");
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sighup;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &sa, nullptr);
}

ReloadSignalWatcher::ReloadSignalWatcher(std::function<void()> on_signal) {
  install_reload_signal_handler();
  // Both series exist (at 0) from the start, so rate() and alerts work.
  reloads("ok");
  reloads("error");
  last_reload_ok().Set(1);
  thread_ = std::thread([this, fn = std::move(on_signal)] {
    const int fd = g_reload_pipe[0];
    if (fd < 0) return;
    while (!stop_.load()) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;  // timeout (checks stop_) or EINTR
      char buf[64];
      bool got = false;
      while (read(fd, buf, sizeof buf) > 0) got = true;  // coalesce pending signals
      if (!got) continue;
      try {
        fn();
      } catch (...) {
        // reload_config reports its own failures; nothing may end this thread.
      }
    }
  });
}

ReloadSignalWatcher::~ReloadSignalWatcher() {
  stop_.store(true);
  thread_.join();
}

}  // namespace tensord
