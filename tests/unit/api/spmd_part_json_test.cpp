// What a world's coordinator forwards to a peer, and the peer's answer.
#include "api/spmd_part_json.h"

#include <gtest/gtest.h>

#include "api/program_json.h"

namespace tensord {
namespace {

TEST(SpmdPartJson, AForwardedPartParsesBackAsTheSameRequestWithItsMembers) {
  std::string body = R"({"program": {"nodes": [{"id": "s", "op": "dist.all_reduce", "args": ["x"],
      "outputs": ["s"]}], "outputs": ["s"]}, "ranks": 3,
      "inputs": {"x": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [1]},
                                    {"dtype": "float32", "shape": [1], "data": [2]},
                                    {"dtype": "float32", "shape": [1], "data": [3]}]},
                 "y": {"shard": {"dtype": "float32", "shape": [3], "data": [4, 5, 6]}, "dim": 0},
                 "z": {"dtype": "float32", "shape": [2], "data": [7, 8]}}})";
  rapidjson::Document d = parse_json_object_insitu(body, "body");
  JobSpec spec = job_spec_from_json(d, {});
  std::string part = spmd_part_to_json(spec, {0, 1, 2}, {1, 2}, "world#7.0", 1500);
  rapidjson::Document pd = parse_json_object_insitu(part, "part");
  JobSpec back = job_spec_from_json(pd, {});
  ASSERT_TRUE(back.spmd);
  EXPECT_EQ(back.spmd->ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(back.spmd->part_members, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(back.spmd->part_key, "world#7.0");
  EXPECT_EQ(back.deadline_ms, 1500);
  EXPECT_EQ(back.program_sha256, spec.program_sha256);
  ASSERT_EQ(back.spmd->inputs.at("x").per_rank.size(), 3u);
  EXPECT_EQ(static_cast<float*>(back.spmd->inputs.at("x").per_rank[2].data())[0], 3.0f);
  EXPECT_EQ(back.spmd->inputs.at("y").shard.shape(), Shape({3}));
  EXPECT_EQ(static_cast<float*>(back.inputs.at("z").data())[1], 8.0f);
}

TEST(SpmdPartJson, APeersAnswerAndItsErrors) {
  std::string ok = R"({"outputs": {"s": {"dtype": "float32", "shape": [1], "data": [6], "replicated": true},
      "m": {"per_rank": [{"dtype": "float32", "shape": [1], "data": [2]},
                         {"dtype": "float32", "shape": [1], "data": [3]}]}}, "job": {}})";
  auto outs = spmd_part_outputs_from_json(200, ok);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].first, "s");         // in the reply's order
  ASSERT_EQ(outs[0].second.size(), 1u);  // replicated: one tensor (its "replicated" field dropped)
  EXPECT_EQ(static_cast<float*>(outs[0].second[0].data())[0], 6.0f);
  EXPECT_EQ(outs[1].first, "m");
  ASSERT_EQ(outs[1].second.size(), 2u);  // one per member
  EXPECT_EQ(static_cast<float*>(outs[1].second[1].data())[0], 3.0f);
  std::string err = R"({"error": {"code": "shape_mismatch", "message": "bad", "node": "n"}})";
  try {
    spmd_part_outputs_from_json(422, err);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kShapeMismatch);
    EXPECT_EQ(e.node(), "n");
  }
  std::string junk = R"({"nothing": 1})";
  try {
    spmd_part_outputs_from_json(502, junk);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
  EXPECT_EQ(error_code_from_name("deadline_exceeded"), ErrorCode::kDeadlineExceeded);
  EXPECT_FALSE(error_code_from_name("nope"));
}

}  // namespace
}  // namespace tensord
