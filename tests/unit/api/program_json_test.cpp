#include "api/program_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdio>
#include <map>
#include <memory>

#include "api/error_reply.h"
#include "api/sha256.h"
#include "ops/error.h"
#include "scheduler/job_spec.h"

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

// Both paths (the CPU's SHA extensions, where it has them, and the
// portable code) give FIPS 180-4's digests, at every length around a block.
TEST(Sha256, KnownVectors) {
  if (!sha256_cpu_extensions()) std::printf("sha256: this CPU has no SHA extensions: the portable path only\n");
  for (bool ext : {false, true}) {
    EXPECT_EQ(sha256_hex("", ext), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc", ext), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", ext),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
                         "qrsmnopqrstnopqrstu",
                         ext),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a'), ext),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  std::string text;
  for (int n = 0; n < 300; ++n) {
    EXPECT_EQ(sha256_hex(text, true), sha256_hex(text, false)) << n << " bytes";
    text.push_back(static_cast<char>(n * 131 + 7));
  }
}

// The "backend" object is written once per thread and reused: a result
// from another backend, or with other libraries, still gets its own.
TEST(ProgramJson, JobBackendFollowsEachResult) {
  auto backend_of = [](const std::string& body) {
    rapidjson::Document d;
    d.Parse(body.c_str());
    EXPECT_TRUE(d.IsObject()) << body;
    const auto& b = d["job"]["backend"];
    std::string out = b["name"].GetString();
    for (auto it = b["libraries"].MemberBegin(); it != b["libraries"].MemberEnd(); ++it) {
      out += std::string(" ") + it->name.GetString() + "=" + it->value.GetString();
    }
    return out;
  };
  JobResult r;
  r.id = "j-1";
  r.backend = "cpu";
  r.libraries = std::make_shared<const std::map<std::string, std::string>>(
      std::map<std::string, std::string>{{"openblas", "0.3"}, {"lapacke", "3.11"}});
  EXPECT_EQ(backend_of(job_result_to_json(r, true, false)), "cpu lapacke=3.11 openblas=0.3");
  EXPECT_EQ(backend_of(job_result_to_json(r, true, false)), "cpu lapacke=3.11 openblas=0.3");
  r.backend = "cuda";
  EXPECT_EQ(backend_of(job_result_to_json(r, true, false)), "cuda lapacke=3.11 openblas=0.3");
  r.libraries = std::make_shared<const std::map<std::string, std::string>>(
      std::map<std::string, std::string>{{"cublas", "13.0"}, {"quote\"d", "x"}});
  EXPECT_EQ(backend_of(job_result_to_json(r, true, false)), "cuda cublas=13.0 quote\"d=x");
  r.libraries.reset();
  EXPECT_EQ(backend_of(job_result_to_json(r, true, false)), "cuda");
}

}  // namespace
}  // namespace tensord
