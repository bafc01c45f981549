#include "api/program_json.h"

#include <gtest/gtest.h>

#include "api/error_reply.h"
#include "api/sha256.h"
#include "ops/error.h"

namespace tensord {
namespace {

ErrorCode parse_code(const std::string& body) {
  try {
    auto d = parse_json_object(body, "body");
    job_spec_from_json(d, {});
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "parsed: " << body;
  return ErrorCode::kInternal;
}

TEST(ProgramJson, ParsesTheApiExample) {
  const char* body = R"({
    "program": {
      "inputs":  {"a": {"dtype": "float32", "shape": [1000, 16, 16]}},
      "nodes": [
        {"id": "eig", "op": "linalg.eigh", "args": ["a"], "kwargs": {"UPLO": "L"}, "outputs": ["w", "v"]},
        {"id": "s",   "op": "sum", "args": ["w"], "kwargs": {"dim": -1}, "outputs": ["total"]}
      ],
      "outputs": ["w", "v", "total"]
    },
    "inputs": {"a": {"dtype": "float32", "shape": [1, 1], "data": [[2]]}},
    "store": {"w": "results/w"}, "return": ["total"], "deadline_ms": 5000, "priority": 3})";
  auto d = parse_json_object(body, "body");
  JobSpec s = job_spec_from_json(d, {});
  ASSERT_EQ(s.program.inputs.size(), 1u);
  EXPECT_EQ(s.program.inputs[0].meta.shape, (Shape{1000, 16, 16}));
  ASSERT_EQ(s.program.nodes.size(), 2u);
  EXPECT_EQ(s.program.nodes[0].op, "linalg.eigh");
  ASSERT_EQ(s.program.nodes[0].kwargs.size(), 1u);
  EXPECT_EQ(s.program.nodes[0].kwargs[0].second.kind, ArgExpr::Kind::kString);
  EXPECT_EQ(s.program.nodes[1].kwargs[0].second.literal.to_int("dim"), -1);
  EXPECT_EQ(s.store.at("w"), "results/w");
  ASSERT_TRUE(s.return_names);
  EXPECT_EQ((*s.return_names)[0], "total");
  EXPECT_EQ(s.deadline_ms, 5000);
  EXPECT_EQ(s.priority, 3);
  EXPECT_EQ(s.program_sha256.size(), 64u);
  EXPECT_TRUE(s.inputs.count("a"));
}

TEST(ProgramJson, ArgumentKinds) {
  const char* body = R"({"program": {"nodes": [
     {"id": "n", "op": "x", "args": ["a", 2, 2.5, true, null, [1, 2], [0.5, 1], ["p", "q"], [],
                                     {"dtype": "int64", "shape": [2], "data": [1, 2]}]}]}})";
  auto d = parse_json_object(body, "body");
  JobSpec s = job_spec_from_json(d, {});
  const auto& a = s.program.nodes[0].args;
  ASSERT_EQ(a.size(), 10u);
  EXPECT_EQ(a[0].kind, ArgExpr::Kind::kString);
  EXPECT_TRUE(a[1].literal.is_int());
  EXPECT_TRUE(a[2].literal.is_double());
  EXPECT_TRUE(a[3].literal.is_bool());
  EXPECT_EQ(a[4].kind, ArgExpr::Kind::kNull);
  EXPECT_TRUE(a[5].literal.is_int_list());
  EXPECT_TRUE(a[6].literal.is_double_list());
  EXPECT_EQ(a[7].strs.size(), 2u);
  EXPECT_EQ(a[8].kind, ArgExpr::Kind::kStringList);
  EXPECT_EQ(a[9].kind, ArgExpr::Kind::kTensor);
  EXPECT_EQ(a[9].tensor.dtype(), DType::kInt64);
}

TEST(ProgramJson, DigestIsStable) {
  const char* b1 = R"({"program": {"nodes": [{"id": "n", "op": "neg", "args": ["x"]}]}, "priority": 1})";
  const char* b2 = R"({"priority": 2, "program":{"nodes":[{"id":"n","op":"neg","args":["x"]}]}})";
  auto d1 = parse_json_object(b1, "b");
  auto d2 = parse_json_object(b2, "b");
  EXPECT_EQ(job_spec_from_json(d1, {}).program_sha256, job_spec_from_json(d2, {}).program_sha256);
}

TEST(ProgramJson, MalformedBodies) {
  EXPECT_EQ(parse_code(""), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code("{"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code("[1]"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(std::string(100000, '[')), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code("{}"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": 3})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": {}}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": [{"op": "neg"}]}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": [{"id": "n"}]}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": [{"id": "n", "op": "neg", "args": "x"}]}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": [{"id": "n", "op": "neg", "args": [[1, "a"]]}]}})"),
            ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"nodes": [{"id": "n", "op": "neg", "color": 1}]}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"inputs": {"a": {"dtype": "nope", "shape": []}}}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {"inputs": {"a": {"dtype": "float32", "shape": [-1]}}}})"),
            ErrorCode::kBadRequest);
  EXPECT_EQ(
      parse_code(R"({"program": {"inputs": {"a": {"dtype": "float32", "shape": [1099511627776, 1099511627776]}}}})"),
      ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {}, "deadline_ms": -5})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {}, "store": {"a": 1}})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {}, "return": "a"})"), ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code(R"({"program": {}, "inputs": {"a": {"dtype": "float32", "shape": [2], "data": [1]}}})"),
            ErrorCode::kBadRequest);
  EXPECT_EQ(parse_code("{\"program\": {}, \"x\": \"\xff\xfe\"}"), ErrorCode::kBadRequest);  // invalid UTF-8
}

TEST(ProgramJson, SubprogramDepthIsBounded) {
  std::string body = R"({"program": )";
  std::string close;
  for (int i = 0; i < 40; ++i) {
    body += R"({"nodes": [{"id": "c", "op": "cond", "then": )";
    close += "}]}";
  }
  body += "{}" + close + "}";
  EXPECT_EQ(parse_code(body), ErrorCode::kBadRequest);
}

TEST(ErrorReply, StatusAndBody) {
  HttpResponse r = error_reply(Error(ErrorCode::kShapeMismatch, "add: \"bad\"\n", "n3"), "rid");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body, R"({"error":{"code":"shape_mismatch","message":"add: \"bad\"\n","node":"n3","request_id":"rid"}})");
  HttpResponse q = error_reply(Error(ErrorCode::kQueueFull, "full"), "r", 3);
  EXPECT_EQ(q.status, 429);
  ASSERT_EQ(q.headers.size(), 1u);
  EXPECT_EQ(q.headers[0].second, "3");
  EXPECT_EQ(http_status(ErrorCode::kCancelled), 499);
  EXPECT_EQ(http_status(ErrorCode::kUnknownOp), 404);
  EXPECT_EQ(error_code_name(ErrorCode::kUnsupported), "invalid_argument");
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace tensord
