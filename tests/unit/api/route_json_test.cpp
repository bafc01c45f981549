// The small route bodies: /v1/info, health, stored tensors, checkpoints,
// admin usage and the 202 of POST /v1/jobs.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "api/admin_json.h"
#include "api/info_json.h"
#include "api/program_json.h"
#include "api/stored_json.h"

namespace tensord {
namespace {

TEST(RouteJson, Health) {
  EXPECT_EQ(health_to_json("ok"), R"({"status":"ok"})");
  EXPECT_EQ(health_to_json("ready"), R"({"status":"ready"})");
}

TEST(RouteJson, ServerInfo) {
  ServerInfo info;
  info.version = "0.1.0";
  info.backend = "cpu";
  info.compiled_backends = {"cpu"};
  info.libraries = {{"openblas", "0.3"}};
  info.devices.push_back(DeviceInfo{Device{}, "host", 1024, 2});
  SchedulerStats::Partition ps;
  ps.inflight = 1;
  ps.queued = 2;
  ps.threads = 2;
  ps.cpus = {0, 1};
  info.partitions.push_back({"default", 1.0, 2, ps});
  info.partitions.push_back({"idle", 0.5, 1, std::nullopt});
  info.max_body_bytes = 10;
  info.uptime_s = 1.5;
  const std::string json = server_info_to_json(info);
  EXPECT_EQ(
      json,
      R"({"name":"tensord","version":"0.1.0","api":"v1","backend":"cpu","compiled_backends":["cpu"],)"
      R"("libraries":{"openblas":"0.3"},"devices":[{"device":")" +
          Device{}.str() +
          R"(","name":"host","total_memory":1024,"compute_units":2}],"ranks":{"local":1,"world":1,"offset":0},"partitions":[)"
          R"({"name":"default","share":1.0,"workqueue_limit":2,"inflight":1,"queued":2,"threads":2,"cpus":[0,1]},)"
          R"({"name":"idle","share":0.5,"workqueue_limit":1}],"max_body_bytes":10,"uptime_s":1.5})");
}

TEST(RouteJson, StoredTensors) {
  TensorMeta m;
  m.dtype = DType::kFloat32;
  m.shape = {2, 3};
  StoredInfo a{"w/\"a\"", m, 24};
  EXPECT_EQ(stored_info_to_json(a), R"({"name":"w/\"a\"","dtype":"float32","shape":[2,3],"bytes":24})");
  EXPECT_EQ(stored_list_to_json({a}), R"({"tensors":[{"name":"w/\"a\"","dtype":"float32","shape":[2,3],"bytes":24}]})");
  EXPECT_EQ(upload_result_to_json({}), R"({"stored":[]})");
  CheckpointInfo ci;
  ci.path = "/state/t.safetensors";
  ci.tensors = 3;
  ci.bytes = 100;
  EXPECT_EQ(checkpoint_info_to_json(ci), R"({"path":"/state/t.safetensors","tensors":3,"bytes":100})");
}

TEST(RouteJson, TenantsAndJobs) {
  TenantUsage u;
  u.name = "alice";
  u.partition = "default";
  u.weight = 2;
  u.memory_bytes = 5;
  u.memory_limit_bytes = 10;
  u.stored_tensors = 1;
  u.max_queued = 8;
  u.max_running = 2;
  EXPECT_EQ(tenants_to_json({u}),
            R"({"tenants":[{"name":"alice","partition":"default","weight":2.0,"admin":false,"memory_bytes":5,)"
            R"("memory_limit_bytes":10,"stored_tensors":1,"max_queued":8,"max_running":2}]})");
  EXPECT_EQ(job_accepted_to_json("job-7"), R"({"id":"job-7","state":"queued"})");
}

}  // namespace
}  // namespace tensord
