// Graph capture bodies (api/graph_json.h): "ranks" and per_rank input
// declarations (API.md 8), and GET /v1/graphs/{id}'s ranks and group.
#include "api/graph_json.h"

#include <gtest/gtest.h>

#include "api/program_json.h"
#include "ops/error.h"

namespace tensord {
namespace {

GraphCaptureRequest parse(const std::string& body) {
  auto d = parse_json_object(body, "body");
  return graph_capture_from_json(d);
}

std::string parse_error(const std::string& body) {
  try {
    parse(body);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << body;
    return e.message();
  }
  ADD_FAILURE() << "parsed: " << body;
  return {};
}

const std::string kProgram = R"("program": {"nodes": [{"id": "a", "op": "dist.all_reduce", "args": ["x"],
                                                       "outputs": ["y"]}], "outputs": ["y"]})";

TEST(GraphJson, RanksAndPerRankDeclarations) {
  GraphCaptureRequest r = parse("{" + kProgram + R"(, "ranks": 3, "inputs": {
      "w": {"dtype": "float32", "shape": [2]},
      "x": {"per_rank": [{"dtype": "float32", "shape": [3, 2]}, {"dtype": "float32", "shape": [2, 2]},
                         {"dtype": "float32", "shape": [2, 2]}]}}})");
  ASSERT_TRUE(r.spmd);
  EXPECT_EQ(r.spmd->count, 3);
  EXPECT_TRUE(r.spmd->ranks.empty());
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs.at("w").shape, Shape({2}));
  ASSERT_EQ(r.per_rank.at("x").size(), 3u);
  EXPECT_EQ(r.per_rank.at("x")[0].shape, Shape({3, 2}));
  EXPECT_EQ(r.per_rank.at("x")[2].shape, Shape({2, 2}));

  GraphCaptureRequest sub = parse("{" + kProgram + R"(, "ranks": [3, 1], "inputs": {"x": {"dtype": "int64",
                                  "shape": []}}})");
  ASSERT_TRUE(sub.spmd);
  EXPECT_EQ(sub.spmd->ranks, (std::vector<int>{3, 1}));
  EXPECT_TRUE(sub.per_rank.empty());

  GraphCaptureRequest plain = parse("{" + kProgram + R"(, "inputs": {"x": {"dtype": "float32", "shape": [1]}}})");
  EXPECT_FALSE(plain.spmd);
}

TEST(GraphJson, MalformedRanksAndDeclarations) {
  const std::string x2 = R"({"dtype": "float32", "shape": [2]})";
  EXPECT_NE(parse_error("{" + kProgram + R"(, "inputs": {"x": {"per_rank": [)" + x2 + "," + x2 + "]}}}")
                .find("needs \"ranks\""),
            std::string::npos);
  EXPECT_NE(parse_error("{" + kProgram + R"(, "ranks": 2, "inputs": {"x": {"per_rank": []}}})").find("non-empty"),
            std::string::npos);
  EXPECT_NE(parse_error("{" + kProgram + R"(, "ranks": 2, "inputs": {"x": {"per_rank": 1}}})").find("non-empty"),
            std::string::npos);
  EXPECT_NE(parse_error("{" + kProgram + R"(, "ranks": 2, "inputs": {"x": {"per_rank": [)" + x2 + "], \"dim\": 0}}}")
                .find("no other field"),
            std::string::npos);
  EXPECT_NE(parse_error("{" + kProgram + R"(, "ranks": 2, "inputs": {"x": {"per_rank": [{"dtype": "float32"}]}}})")
                .find("per_rank[0]"),
            std::string::npos);
  EXPECT_NE(parse_error("{" + kProgram + R"(, "ranks": 2, "pool": "g-1", "inputs": {"x": )" + x2 + "}}")
                .find("pools of its own"),
            std::string::npos);
  for (const char* ranks : {"0", "-1", "[]", "\"all\"", "[0, -2]", "[0.5]"}) {
    EXPECT_NE(parse_error("{" + kProgram + ", \"ranks\": " + ranks + R"(, "inputs": {"x": )" + x2 + "}}")
                  .find("request.ranks"),
              std::string::npos)
        << ranks;
  }
}

TEST(GraphJson, InfoShowsTheGroupOfAnSpmdGraphOnly) {
  GraphInfo info;
  info.id = "g-1";
  info.pool = "g-1";
  std::string plain = graph_info_to_json(info);
  EXPECT_EQ(plain.find("\"ranks\""), std::string::npos) << plain;
  info.ranks = {3, 1};
  info.group = "ranks:3,1";
  std::string spmd = graph_info_to_json(info);
  EXPECT_NE(spmd.find(R"("ranks":[3,1],"group":"ranks:3,1")"), std::string::npos) << spmd;
}

}  // namespace
}  // namespace tensord
