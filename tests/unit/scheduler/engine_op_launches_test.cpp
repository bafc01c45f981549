// tensord_op_launches_total{backend} on an engine beside a
// device backend (the fake one, with fake_device_kernels.h).
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <string>

#include "metrics/metrics.h"
#include "ops/fake/fake_backend.h"
#include "scheduler/engine.h"
#include "tests/unit/graphs/fake_device_kernels.h"
#include "tests/unit/graphs/program_builder.h"
#include "tests/unit/scheduler/one_tenant_config.h"
#include "tests/unit/scheduler/run_job.h"

namespace tensord {
namespace {
using namespace testing_util;

JobSpec add_neg(Tensor x) {
  JobSpec s;
  s.program.nodes.push_back(node("a", "add", {ref("x"), ref("x")}, {"y"}));
  s.program.nodes.push_back(node("b", "neg", {ref("y")}, {"z"}));
  s.program.outputs = {"y", "z"};
  s.inputs["x"] = std::move(x);
  return s;
}

// tensord_op_launches_total{backend} names the backend whose kernel ran:
// on a device server, a node the device takes counts under its name and a
// CPU fallback under "cpu" (not the server's backend).
double launches(const std::string& op, const std::string& backend) {
  for (const auto& f : collect_metrics()) {
    if (f.name != "tensord_op_launches_total") continue;
    for (const auto& m : f.metric) {
      bool o = false, b = false;
      for (const auto& l : m.label) {
        o = o || (l.name == "op" && l.value == op);
        b = b || (l.name == "backend" && l.value == backend);
      }
      if (o && b) return m.counter.value;
    }
  }
  return 0;
}

TEST(EngineDevice, OpLaunchesNameTheBackendWhoseKernelRan) {
  Engine e(std::make_unique<FakeBackend>(), one_tenant_config());
  Tenant t(one_tenant_config().tenants[0]);
  const double add_fake = launches("add", "fake"), add_cpu = launches("add", "cpu");
  const double neg_fake = launches("neg", "fake"), neg_cpu = launches("neg", "cpu");
  for (int i = 0; i < 3; ++i)
    testing_util::run_job(e, t, add_neg(f32({2}, {1, 2})));  // add (device), neg (host fallback)
  EXPECT_EQ(launches("add", "fake") - add_fake, 3);
  EXPECT_EQ(launches("add", "cpu") - add_cpu, 0);
  EXPECT_EQ(launches("neg", "cpu") - neg_cpu, 3) << "the CPU fallback counts as cpu";
  EXPECT_EQ(launches("neg", "fake") - neg_fake, 0) << "not as the server's backend";
}

}  // namespace
}  // namespace tensord
