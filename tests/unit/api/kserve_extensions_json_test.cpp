#include "api/kserve_extensions_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "ops/error.h"

namespace tensord {
namespace {

KServeModel model() {
  KServeModel m;
  m.name = "aff";
  m.inputs.push_back({"x", TensorMeta{DType::kFloat32, {2, 2}}});
  m.inputs.push_back({"f8", TensorMeta{DType::kFloat8E4M3FN, {1}}});
  m.outputs.push_back({"y", TensorMeta{DType::kBFloat16, {}}});
  return m;
}

rapidjson::Document parsed(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.c_str());
  EXPECT_FALSE(d.HasParseError()) << s;
  return d;
}

TEST(KServeExtensionsJson, ConfigIsTritonShaped) {
  auto d = parsed(kserve_model_config_json(model(), "p0", false));
  EXPECT_STREQ(d["name"].GetString(), "aff");
  EXPECT_STREQ(d["platform"].GetString(), "tensord");
  EXPECT_STREQ(d["backend"].GetString(), "tensord");
  EXPECT_EQ(d["max_batch_size"].GetInt(), 0);
  ASSERT_EQ(d["input"].Size(), 2u);
  EXPECT_STREQ(d["input"][0]["name"].GetString(), "x");
  EXPECT_STREQ(d["input"][0]["data_type"].GetString(), "TYPE_FP32");
  EXPECT_EQ(d["input"][0]["dims"].Size(), 2u);
  EXPECT_EQ(d["input"][0]["dims"][1].GetInt64(), 2);
  EXPECT_STREQ(d["input"][1]["data_type"].GetString(), "TYPE_INVALID");  // no KServe datatype
  ASSERT_EQ(d["output"].Size(), 1u);
  EXPECT_STREQ(d["output"][0]["data_type"].GetString(), "TYPE_BF16");
  EXPECT_EQ(d["output"][0]["dims"].Size(), 0u);
  EXPECT_FALSE(d["model_transaction_policy"]["decoupled"].GetBool());
  ASSERT_EQ(d["instance_group"].Size(), 1u);
  EXPECT_STREQ(d["instance_group"][0]["name"].GetString(), "p0");
  EXPECT_STREQ(d["instance_group"][0]["kind"].GetString(), "KIND_CPU");
  EXPECT_FALSE(d.HasMember("dynamic_batching"));  // perf_analyzer reads its absence: no batching
  EXPECT_FALSE(d.HasMember("sequence_batching"));
  auto g = parsed(kserve_model_config_json(model(), "gpu0", true));
  EXPECT_STREQ(g["instance_group"][0]["kind"].GetString(), "KIND_GPU");
}

TEST(KServeExtensionsJson, StatsCarryEveryCounter) {
  KServeModelStats s;
  s.name = "m";
  s.last_inference_ms = 1700000000123;
  s.inference_count = 7;
  s.execution_count = 6;
  s.success = {6, 600};
  s.fail = {1, 10};
  s.queue = {6, 60};
  s.compute_input = {6, 61};
  s.compute_infer = {6, 62};
  s.compute_output = {6, 63};
  auto d = parsed(kserve_model_stats_json({s}));
  ASSERT_EQ(d["model_stats"].Size(), 1u);
  const auto& m = d["model_stats"][0];
  EXPECT_STREQ(m["name"].GetString(), "m");
  EXPECT_STREQ(m["version"].GetString(), "1");
  EXPECT_EQ(m["last_inference"].GetInt64(), 1700000000123);
  EXPECT_EQ(m["inference_count"].GetUint64(), 7u);
  EXPECT_EQ(m["execution_count"].GetUint64(), 6u);
  const auto& is = m["inference_stats"];
  EXPECT_EQ(is["success"]["count"].GetUint64(), 6u);
  EXPECT_EQ(is["success"]["ns"].GetUint64(), 600u);
  EXPECT_EQ(is["fail"]["count"].GetUint64(), 1u);
  EXPECT_EQ(is["queue"]["ns"].GetUint64(), 60u);
  EXPECT_EQ(is["compute_input"]["ns"].GetUint64(), 61u);
  EXPECT_EQ(is["compute_infer"]["ns"].GetUint64(), 62u);
  EXPECT_EQ(is["compute_output"]["ns"].GetUint64(), 63u);
  EXPECT_EQ(is["cache_hit"]["count"].GetUint64(), 0u);
  EXPECT_TRUE(m["batch_stats"].IsArray());
  EXPECT_EQ(parsed(kserve_model_stats_json({}))["model_stats"].Size(), 0u);
}

TEST(KServeExtensionsJson, RepositoryIndex) {
  EXPECT_EQ(kserve_repository_index_json({"a", "b\"c"}),
            R"([{"name":"a","version":"1","state":"READY","reason":""},)"
            R"({"name":"b\"c","version":"1","state":"READY","reason":""}])");
  EXPECT_FALSE(kserve_repository_index_ready_only(""));
  EXPECT_FALSE(kserve_repository_index_ready_only(" \n"));
  EXPECT_FALSE(kserve_repository_index_ready_only("{}"));
  EXPECT_TRUE(kserve_repository_index_ready_only(R"({"ready": true})"));
  EXPECT_FALSE(kserve_repository_index_ready_only(R"({"ready": false, "other": 1})"));
  for (const char* bad : {R"({"ready": "yes"})", "[1]", "{", "nul"}) {
    EXPECT_THROW(kserve_repository_index_ready_only(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace tensord

namespace tensord {
namespace {

TEST(KServeExtensionsJson, ShmRegisterAndStatus) {
  auto r = kserve_shm_register_from_json(R"({"key": "/k", "offset": 8, "byte_size": 64})");
  EXPECT_EQ(r.key, "/k");
  EXPECT_EQ(r.offset, 8u);
  EXPECT_EQ(r.byte_size, 64u);
  EXPECT_EQ(kserve_shm_register_from_json(R"({"key": "/k", "byte_size": 1})").offset, 0u);
  for (const char* bad :
       {"", "{", "[]", R"({"byte_size": 1})", R"({"key": "/k"})", R"({"key": 3, "byte_size": 1})",
        R"({"key": "/k", "byte_size": -1})", R"({"key": "/k", "byte_size": 1.5})",
        R"({"key": "/k", "byte_size": 1, "offset": "2"})", R"({"key": "/k", "byte_size": 1, "x": 1})"}) {
    EXPECT_THROW(kserve_shm_register_from_json(bad), Error) << bad;
  }
  EXPECT_EQ(kserve_shm_status_json({{"a", "/k", 0, 16}}), R"([{"name":"a","key":"/k","offset":0,"byte_size":16}])");
  EXPECT_EQ(kserve_shm_status_json({}), "[]");
}

}  // namespace
}  // namespace tensord
