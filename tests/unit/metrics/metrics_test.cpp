#include "metrics/metrics.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace tensord {
namespace {

// Value of the first sample line starting with `prefix` ("name " or "name{...} ").
double sample(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::strtod(line.c_str() + prefix.size(), nullptr);
  }
  ADD_FAILURE() << "no sample " << prefix << " in\n" << text;
  return -1;
}

TEST(Metrics, RegistryIsProcessWide) {
  EXPECT_EQ(&metrics_registry(), &metrics_registry());
}

TEST(Metrics, ProcessFamilies) {
  std::string text = render_metrics();
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_open_fds gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_start_time_seconds gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP process_open_fds "), std::string::npos) << text;

  EXPECT_GT(sample(text, "process_resident_memory_bytes "), 1e5);
  EXPECT_GE(sample(text, "process_cpu_seconds_total "), 0.0);
  EXPECT_GE(sample(text, "process_open_fds "), 3.0);  // stdin, stdout, stderr
  double start = sample(text, "process_start_time_seconds ");
  EXPECT_GT(start, 1.5e9);
  EXPECT_LT(start, 4e9);
}

TEST(Metrics, OpenFdsTracksDescriptors) {
  double before = sample(render_metrics(), "process_open_fds ");
  FILE* f = std::fopen("/proc/self/stat", "r");
  ASSERT_NE(f, nullptr);
  double during = sample(render_metrics(), "process_open_fds ");
  std::fclose(f);
  EXPECT_EQ(during, before + 1);
}

TEST(Metrics, BuildInfoHasLabels) {
  register_build_info("1.2.3", "cpu");
  std::string text = render_metrics();
  EXPECT_NE(text.find("# TYPE tensord_build_info gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP tensord_build_info "), std::string::npos) << text;
  EXPECT_EQ(sample(text, "tensord_build_info{backend=\"cpu\",version=\"1.2.3\"} "), 1.0);

  // Re-registering replaces the series rather than adding a second one.
  register_build_info("1.2.3", "cuda");
  text = render_metrics();
  EXPECT_EQ(text.find("backend=\"cpu\""), std::string::npos) << text;
  EXPECT_EQ(sample(text, "tensord_build_info{backend=\"cuda\",version=\"1.2.3\"} "), 1.0);
}

TEST(Metrics, ComponentFamiliesAreExported) {
  auto& family =
      prometheus::BuildCounter().Name("tensord_metrics_test_total").Help("Test counter.").Register(metrics_registry());
  family.Add({{"k", "v"}}).Increment(3);
  std::string text = render_metrics();
  EXPECT_EQ(sample(text, "tensord_metrics_test_total{k=\"v\"} "), 3.0);
}

}  // namespace
}  // namespace tensord
