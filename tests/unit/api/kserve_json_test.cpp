// KServe v2 bodies (api/kserve_json.h, API.md 11): datatypes, metadata,
// infer requests with and without the binary tensor data extension, and
// responses; every malformed request is bad_request.
#include "api/kserve_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstring>
#include <string>

#include "api/error_reply.h"
#include "ops/error.h"

namespace tensord {
namespace {

KServeModel model() {
  KServeModel m;
  m.name = "aff";
  m.inputs = {{"x", TensorMeta{DType::kFloat32, {2, 2}}}, {"b", TensorMeta{DType::kBool, {3}}}};
  m.outputs = {{"y", TensorMeta{DType::kFloat32, {2, 2}}}, {"t", TensorMeta{DType::kInt64, {}}}};
  return m;
}

const std::string kB = R"({"name": "b", "shape": [3], "datatype": "BOOL", "data": [true, false, 1]})";

std::string req(const std::string& x_input, const std::string& rest = "") {
  return R"({"inputs": [)" + x_input + ", " + kB + "]" + rest + "}";
}

const std::string kX = R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4]]})";

KServeInferRequest parse(std::string body, std::optional<size_t> header = std::nullopt) {
  return kserve_infer_from_body(body, header, model());
}

void expect_bad(const std::string& body, const std::string& needle, std::optional<size_t> header = std::nullopt) {
  try {
    parse(body, header);
    ADD_FAILURE() << "accepted: " << body.substr(0, 300);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadRequest) << e.message();
    EXPECT_NE(e.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << e.message();
  }
}

TEST(KServeJson, DatatypesMapBothWaysAndOthersHaveNone) {
  for (DType t : {DType::kBool, DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
                  DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    auto name = kserve_datatype(t);
    ASSERT_TRUE(name) << dtype_name(t);
    EXPECT_EQ(dtype_from_kserve(*name), t);
  }
  EXPECT_EQ(*kserve_datatype(DType::kBFloat16), "BF16");
  EXPECT_FALSE(kserve_datatype(DType::kComplex64));
  EXPECT_FALSE(kserve_datatype(DType::kFloat8E4M3FN));
  EXPECT_FALSE(dtype_from_kserve("fp32"));
  EXPECT_FALSE(dtype_from_kserve("BYTES"));
  KServeModel m = model();
  m.outputs.push_back({"c", TensorMeta{DType::kComplex64, {1}}});
  try {
    check_kserve_dtypes(m);
    FAIL() << "complex64 output";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("output 'c' has dtype complex64"), std::string::npos) << e.message();
  }
}

TEST(KServeJson, Metadata) {
  EXPECT_EQ(kserve_server_metadata_json("1.2", {"binary_tensor_data", "statistics"}),
            R"({"name":"tensord","version":"1.2","extensions":["binary_tensor_data","statistics"]})");
  KServeModel m = model();
  m.inputs.push_back({"f8", TensorMeta{DType::kFloat8E4M3FN, {1}}});
  EXPECT_EQ(kserve_model_metadata_json(m),
            R"({"name":"aff","versions":["1"],"platform":"tensord","inputs":[{"name":"x","datatype":"FP32",)"
            R"("shape":[2,2]},{"name":"b","datatype":"BOOL","shape":[3]},{"name":"f8","datatype":"float8_e4m3fn",)"
            R"("shape":[1]}],"outputs":[{"name":"y","datatype":"FP32","shape":[2,2]},{"name":"t",)"
            R"("datatype":"INT64","shape":[]}]})");
  EXPECT_EQ(kserve_model_ready_json("aff"), R"({"name":"aff","ready":true})");
}

TEST(KServeJson, JsonRequestNestedAndFlat) {
  KServeInferRequest r = parse(req(kX, R"(, "id": "q", "outputs": [{"name": "t"}])"));
  EXPECT_EQ(r.id, "q");
  ASSERT_EQ(r.inputs.size(), 2u);
  const Tensor& x = r.inputs.at("x");
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
  EXPECT_EQ(x.data_ptr<float>()[3], 4.0f);
  EXPECT_EQ(r.inputs.at("b").dtype(), DType::kBool);
  EXPECT_TRUE(r.outputs_named);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "t");
  EXPECT_FALSE(r.outputs[0].binary);
  r = parse(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4.5]})"));
  EXPECT_EQ(r.inputs.at("x").data_ptr<float>()[3], 4.5f);
  EXPECT_FALSE(r.id);
  EXPECT_FALSE(r.outputs_named);
  ASSERT_EQ(r.outputs.size(), 2u) << "all the model's outputs";
  EXPECT_EQ(r.outputs[0].name, "y");
}

TEST(KServeJson, BinaryInputsAndOutputSettings) {
  std::string header = R"({"inputs": [{"name": "b", "shape": [3], "datatype": "BOOL",
      "parameters": {"binary_data_size": 3}}, {"name": "x", "shape": [2, 2], "datatype": "FP32",
      "parameters": {"binary_data_size": 16}}], "parameters": {"binary_data_output": true, "timeout": 2500},
      "outputs": [{"name": "t"}, {"name": "y", "parameters": {"binary_data": false}}]})";
  const float xs[4] = {1.5f, -2.0f, 0.25f, 8.0f};
  std::string body = header + std::string("\x01\x00\x01", 3) + std::string(reinterpret_cast<const char*>(xs), 16);
  KServeInferRequest r = parse(body, header.size());
  EXPECT_EQ(std::memcmp(r.inputs.at("x").data(), xs, 16), 0);
  EXPECT_EQ(static_cast<const unsigned char*>(r.inputs.at("b").data())[2], 1);
  EXPECT_EQ(r.timeout_us, 2500);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].binary) << "the request's binary_data_output";
  EXPECT_FALSE(r.outputs[1].binary) << "the output's own setting wins";

  expect_bad(body.substr(0, body.size() - 1), "ends 15 bytes into input 'x'", header.size());
  expect_bad(body + "z", "1 bytes after the last binary input", header.size());
  expect_bad(body, "Inference-Header-Content-Length is", body.size() + 1);
  std::string bad_bool = header + std::string("\x01\x02\x01", 3) + std::string(reinterpret_cast<const char*>(xs), 16);
  expect_bad(bad_bool, "BOOL element 1 is byte 2", header.size());
}

TEST(KServeJson, MalformedRequestsAreBadRequest) {
  expect_bad("", "invalid JSON");
  expect_bad("[]", "JSON object");
  expect_bad("{}", "\"inputs\"");
  expect_bad(R"({"inputs": [], "model": 1})", "unknown field 'model'");
  expect_bad(R"({"inputs": [], "id": 3})", "\"id\" must be a string");
  expect_bad(req(R"({"name": "x", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]})"),
             "input 'x': shape [4], the model takes [2, 2]");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP64", "data": [1, 2, 3, 4]})"),
             "datatype 'FP64', the model takes FP32");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3]})"), "3 elements");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32"})"), "missing \"data\"");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4],
      "parameters": {"binary_data_size": 16}})"),
             "not both");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "parameters": {"binary_data_size": 15}})"),
             "binary_data_size 15 disagrees with FP32[2, 2] (16 bytes)");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4], "shm": 1})"),
             "unknown input field 'shm'");
  expect_bad(req(kX, R"(, "outputs": [{"name": "z"}])"), "unknown output 'z'; the model's outputs are y, t");
  expect_bad(req(kX, R"(, "outputs": [{"name": "t"}, {"name": "t"}])"), "requested twice");
  expect_bad(req(kX, R"(, "outputs": [{"name": "t", "parameters": {"classification": 1}}])"), "classification");
  expect_bad(req(kX, R"(, "parameters": {"binary_data_output": 1})"), "binary_data_output must be true or false");
  expect_bad(req(kX, R"(, "parameters": {"timeout": -1})"), "timeout");
  expect_bad(R"({"inputs": [)" + kX + "]}", "missing input 'b'");
  expect_bad(R"({"inputs": [)" + kX + ", " + kX + ", " + kB + "]}", "input 'x' given twice");
  expect_bad(R"({"inputs": [{"name": "q", "shape": [], "datatype": "FP32", "data": [1]}]})",
             "unknown input 'q'; the model's inputs are x, b");
  // A JSON body with a binary input but no binary part.
  expect_bad(R"({"inputs": [{"name": "b", "shape": [3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}},)" +
                 kX + "]}",
             "ends 0 bytes into input 'b'");
  EXPECT_FALSE(parse_inference_header_length(""));
  EXPECT_EQ(parse_inference_header_length("42"), 42u);
  for (const char* bad : {"-1", "4 2", "x", "0x10", "99999999999999999999999"}) {
    EXPECT_THROW(parse_inference_header_length(bad), Error) << bad;
  }
}

TEST(KServeJson, ResponseJsonAndBinary) {
  Tensor y = Tensor::empty_host(DType::kFloat32, {2});
  y.data_ptr<float>()[0] = 1.5f;
  y.data_ptr<float>()[1] = -2.0f;
  Tensor t = Tensor::empty_host(DType::kInt64, {});
  t.data_ptr<int64_t>()[0] = 7;
  KServeInferResponse r =
      kserve_infer_response("m", std::string("id1"), {{{"y", false, std::nullopt}, y}, {{"t", true, std::nullopt}, t}});
  EXPECT_EQ(r.header, R"({"model_name":"m","model_version":"1","id":"id1","outputs":[{"name":"y","datatype":"FP32",)"
                      R"("shape":[2],"data":[1.5,-2.0]},{"name":"t","datatype":"INT64","shape":[],)"
                      R"("parameters":{"binary_data_size":8}}]})");
  ASSERT_EQ(r.binary.size(), 1u);
  EXPECT_EQ(r.binary[0].data(), t.data()) << "the tensor's own memory, not a copy";
  r = kserve_infer_response("m", std::nullopt, {{{"y", false, std::nullopt}, y}});
  EXPECT_EQ(r.header.find("\"id\""), std::string::npos);
  EXPECT_TRUE(r.binary.empty());
}

TEST(KServeJson, SharedMemoryInputsAndOutputs) {
  KServeInferRequest r = parse(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "parameters":
      {"shared_memory_region": "in", "shared_memory_byte_size": 16, "shared_memory_offset": 32}})",
                                   R"(, "outputs": [{"name": "y", "parameters": {"shared_memory_region": "out",
      "shared_memory_byte_size": 64}}, {"name": "t", "parameters": {"binary_data": true}}])"));
  ASSERT_EQ(r.shm_inputs.size(), 1u);
  EXPECT_EQ(r.shm_inputs[0].name, "x");
  EXPECT_EQ(r.shm_inputs[0].ref.region, "in");
  EXPECT_EQ(r.shm_inputs[0].ref.offset, 32u);
  EXPECT_EQ(r.shm_inputs[0].ref.byte_size, 16u);
  ASSERT_TRUE(r.inputs.contains("x"));  // sized for the caller to read the region into
  EXPECT_EQ(r.inputs.at("x").dtype(), DType::kFloat32);
  EXPECT_EQ(r.inputs.at("x").shape(), (Shape{2, 2}));
  ASSERT_EQ(r.outputs.size(), 2u);
  ASSERT_TRUE(r.outputs[0].shm);
  EXPECT_EQ(r.outputs[0].shm->region, "out");
  EXPECT_FALSE(r.outputs[0].binary);
  EXPECT_FALSE(r.outputs[1].shm);
  const std::string shm_x = R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "parameters": )";
  expect_bad(req(shm_x + R"({"shared_memory_region": "in", "shared_memory_byte_size": 12}})"),
             "shared_memory_byte_size 12 disagrees with FP32[2, 2] (16 bytes)");
  expect_bad(req(shm_x + R"({"shared_memory_region": "in"}})"), "without shared_memory_byte_size");
  expect_bad(req(shm_x + R"({"shared_memory_byte_size": 16}})"), "without shared_memory_region");
  expect_bad(req(shm_x + R"({"shared_memory_region": "", "shared_memory_byte_size": 16}})"), "region's name");
  expect_bad(req(shm_x + R"({"shared_memory_region": "in", "shared_memory_byte_size": 16,
      "shared_memory_offset": -1}})"),
             "non-negative");
  expect_bad(req(R"({"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4], "parameters":
      {"shared_memory_region": "in", "shared_memory_byte_size": 16}})"),
             "give one of");
  expect_bad(req(kX, R"(, "outputs": [{"name": "y", "parameters": {"shared_memory_region": "o",
      "shared_memory_byte_size": 16, "binary_data": true}}])"),
             "both given");
  expect_bad(req(kX, R"(, "outputs": [{"name": "y", "parameters": {"shared_memory_handle": 1}}])"),
             "shared_memory_handle is not supported");

  Tensor y = Tensor::empty_host(DType::kFloat32, {2});
  KServeInferResponse resp = kserve_infer_response("m", std::nullopt, {{{"y", false, KServeShmRef{"out", 8, 64}}, y}});
  EXPECT_EQ(resp.header, R"({"model_name":"m","model_version":"1","outputs":[{"name":"y","datatype":"FP32",)"
                         R"("shape":[2],"parameters":{"shared_memory_region":"out","shared_memory_byte_size":8,)"
                         R"("shared_memory_offset":8}}]})");
  EXPECT_TRUE(resp.binary.empty());
}

TEST(KServeJson, ErrorStyleByPath) {
  EXPECT_EQ(error_style_for("/v2"), ErrorStyle::kKServe);
  EXPECT_EQ(error_style_for("/v2/models/{model}/infer"), ErrorStyle::kKServe);
  EXPECT_EQ(error_style_for("/v2?x=1"), ErrorStyle::kKServe);
  EXPECT_EQ(error_style_for("/v2x"), ErrorStyle::kTensord);
  EXPECT_EQ(error_style_for("/v1/graphs"), ErrorStyle::kTensord);
  EXPECT_EQ(error_style_for(""), ErrorStyle::kTensord);
  HttpResponse r = error_reply(Error(ErrorCode::kUnauthenticated, "no \"token\""), "rid", 0, ErrorStyle::kKServe);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, R"({"error":"no \"token\""})");
  r = error_reply(Error(ErrorCode::kQueueFull, "full"), "rid", 3, ErrorStyle::kKServe);
  EXPECT_EQ(r.status, 429);
  bool retry = false;
  for (const auto& [k, v] : r.headers) retry = retry || (k == "Retry-After" && v == "3");
  EXPECT_TRUE(retry);
}

}  // namespace
}  // namespace tensord
