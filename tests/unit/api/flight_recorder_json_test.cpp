// The flight recorder's JSON dump in PyTorch's layout (version "2.10").
#include "api/flight_recorder_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "ops/dist/flight_recorder.h"

namespace tensord::dist {
namespace {

TEST(FlightRecorderJson, PyTorchLayout) {
  FlightRecorder fr(3, 8);
  fr.set_comm_lib_version("0.5.0");
  fr.register_group("ranks:1,3", "ranks:1,3", 2, {1, 3});
  FlightRecord e;
  e.pg_id = 2;
  e.pg_name = "ranks:1,3";
  e.pg_desc = "ranks:1,3";
  e.collective_seq_id = 1;
  e.op_id = 1;
  e.profiling_name = "gloo:all_reduce";
  e.input_sizes = {{3, 4}};
  e.input_dtypes = {DType::kFloat32};
  e.output_sizes = {{3, 4}};
  e.output_dtypes = {DType::kFloat32};
  e.timeout_ms = 60000;
  const uint64_t id = fr.record(e);
  fr.started(id);
  fr.completed(id);
  e.collective_seq_id = 2;
  e.profiling_name = "gloo:all_gather";
  e.input_dtypes = {DType::kInt64};
  fr.record(e);  // still scheduled

  const std::string json = flight_recorder_json(fr.dump());
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  EXPECT_STREQ(doc["version"].GetString(), "2.10");
  EXPECT_STREQ(doc["comm_lib_version"].GetString(), "0.5.0");
  EXPECT_EQ(doc["rank"].GetInt(), 3);
  const auto& cfg = doc["pg_config"]["ranks:1,3"];
  EXPECT_STREQ(cfg["name"].GetString(), "ranks:1,3");
  EXPECT_STREQ(cfg["desc"].GetString(), "ranks:1,3");
  EXPECT_STREQ(cfg["ranks"].GetString(), "[1, 3]");
  const auto& st = doc["pg_status"]["ranks:1,3"];
  EXPECT_STREQ(st["last_enqueued_collective"].GetString(), "2");
  EXPECT_STREQ(st["last_started_collective"].GetString(), "1");
  EXPECT_STREQ(st["last_completed_collective"].GetString(), "1");
  const auto& entries = doc["entries"];
  ASSERT_EQ(entries.Size(), 2u);
  const auto& a = entries[0];
  for (const char* k :
       {"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name",
        "time_created_ns", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes", "state",
        "time_discovered_started_ns", "time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p", "rank"}) {
    EXPECT_TRUE(a.HasMember(k)) << k;
  }
  EXPECT_EQ(a["record_id"].GetUint64(), 0u);
  EXPECT_EQ(a["pg_id"].GetInt(), 2);
  EXPECT_STREQ(a["process_group"][0].GetString(), "ranks:1,3");
  EXPECT_EQ(a["collective_seq_id"].GetInt(), 1);
  EXPECT_EQ(a["p2p_seq_id"].GetInt(), 0);
  EXPECT_STREQ(a["profiling_name"].GetString(), "gloo:all_reduce");
  EXPECT_EQ(a["input_sizes"][0][1].GetInt(), 4);
  EXPECT_STREQ(a["input_dtypes"][0].GetString(), "Float");
  EXPECT_STREQ(a["state"].GetString(), "completed");
  EXPECT_GT(a["time_discovered_completed_ns"].GetInt64(), 0);
  EXPECT_TRUE(a["retired"].GetBool());
  EXPECT_EQ(a["timeout_ms"].GetInt(), 60000);
  EXPECT_FALSE(a["is_p2p"].GetBool());
  const auto& b = entries[1];
  EXPECT_STREQ(b["state"].GetString(), "scheduled");
  EXPECT_STREQ(b["input_dtypes"][0].GetString(), "Long");
  EXPECT_EQ(b["time_discovered_started_ns"].GetInt64(), 0);
  EXPECT_FALSE(b["retired"].GetBool());
}

TEST(FlightRecorderJson, PyTorchDtypeNames) {
  EXPECT_EQ(pytorch_scalar_type_name(DType::kFloat64), "Double");
  EXPECT_EQ(pytorch_scalar_type_name(DType::kInt32), "Int");
  EXPECT_EQ(pytorch_scalar_type_name(DType::kUInt8), "Byte");
  EXPECT_EQ(pytorch_scalar_type_name(DType::kBFloat16), "BFloat16");
  EXPECT_EQ(pytorch_scalar_type_name(DType::kFloat8E4M3FN), "Float8_e4m3fn");
}

TEST(FlightRecorderJson, EveryLocalRankKeyedByItsRank) {
  FlightRecorder a(0, 4), b(1, 4);
  a.register_group("world", "world", 0, {0, 1});
  b.register_group("world", "world", 0, {0, 1});
  FlightRecord e;
  e.pg_name = "world";
  e.collective_seq_id = 1;
  b.record(e);
  rapidjson::Document d;
  d.Parse(flight_recorder_ranks_json({a.dump(), b.dump()}).c_str());
  ASSERT_FALSE(d.HasParseError());
  ASSERT_TRUE(d["ranks"].IsObject());
  EXPECT_EQ(d["ranks"]["0"]["entries"].Size(), 0u);
  ASSERT_EQ(d["ranks"]["1"]["entries"].Size(), 1u);
  EXPECT_EQ(d["ranks"]["1"]["rank"].GetInt(), 1);
  EXPECT_STREQ(d["ranks"]["1"]["version"].GetString(), "2.10");
}

}  // namespace
}  // namespace tensord::dist
