// libFuzzer target: the program parser, validator and shape inference, as
// POST /v1/run and /v1/jobs use them before anything is queued
// (server/routes_run.cpp parse_job_request, then Engine::submit's
// compile_program with the request's input metas and the tenant's stored
// tensors).
// Input: a /v1/run JSON body ({"program", "inputs", "store", "return", ...}).
// Invariants: only the codes API.md 2 documents for a bad request or
// program (bad_request, invalid_program, unknown_op, not_found, 422s); a
// compiled program is in topological order with every value id in range,
// valid shapes (rank <= 16, numel <= 2^48), its declared outputs and a
// non-negative memory plan; compiling again gives the same program.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "api/program_json.h"
#include "graphs/compiled_program.h"
#include "ops/shape.h"
#include "tests/fuzz/fuzz_util.h"

namespace tensord::fuzz {
namespace {

// The tenant's stored tensors a program may name as "$stored/<name>".
const std::map<std::string, Tensor>& stored() {
  static const std::map<std::string, Tensor> s = [] {
    std::map<std::string, Tensor> m;
    m.emplace("w", Tensor::zeros_host(DType::kFloat32, {4, 4}));
    m.emplace("b", Tensor::zeros_host(DType::kFloat32, {4}));
    m.emplace("m", Tensor::zeros_host(DType::kFloat32, {4, 4}));
    m.emplace("v", Tensor::zeros_host(DType::kFloat32, {4, 4}));
    m.emplace("step", Tensor::zeros_host(DType::kInt64, {}));
    m.emplace("flag", Tensor::zeros_host(DType::kBool, {}));
    m.emplace("h", Tensor::zeros_host(DType::kFloat16, {2, 3}));
    m.emplace("z", Tensor::zeros_host(DType::kComplex64, {3}));
    return m;
  }();
  return s;
}

std::optional<Tensor> lookup(const std::string& name) {
  auto it = stored().find(name);
  if (it == stored().end()) return std::nullopt;
  return it->second;
}

void check_compiled(const CompiledProgram& cp, const Program& p) {
  const size_t nv = cp.values.size();
  check(cp.constants.size() == nv, "constants not indexed like values");
  for (size_t v = 0; v < nv; ++v) {
    const ValueInfo& vi = cp.values[v];
    expect_no_throw("shape_numel of an inferred value", [&] { shape_numel(vi.meta.shape); });
    if (vi.source == ValueInfo::Source::kNode) {
      check(vi.producer >= 0 && static_cast<size_t>(vi.producer) < cp.nodes.size(),
            "value '" + vi.name + "' has no producing node");
    }
  }
  for (size_t i = 0; i < cp.nodes.size(); ++i) {
    const BoundNode& b = cp.nodes[i];
    check(b.op != nullptr, "node '" + b.id + "' is not bound to an op");
    for (const auto& param : b.tensor_params) {
      for (int v : param) {
        check(v >= 0 && static_cast<size_t>(v) < nv, "node '" + b.id + "' reads a value id out of range");
        const ValueInfo& vi = cp.values[static_cast<size_t>(v)];
        if (vi.source == ValueInfo::Source::kNode) {
          check(static_cast<size_t>(vi.producer) < i, "node '" + b.id + "' runs before its operand's producer");
        }
      }
    }
    for (int v : b.outputs) {
      check(v >= 0 && static_cast<size_t>(v) < nv, "node '" + b.id + "' writes a value id out of range");
      check(cp.values[static_cast<size_t>(v)].producer == static_cast<int>(i),
            "node '" + b.id + "' writes a value another node produces");
    }
  }
  check(cp.outputs.size() == p.outputs.size(), "compiled outputs differ from the program's");
  for (size_t i = 0; i < cp.outputs.size(); ++i) {
    check(cp.outputs[i].first == p.outputs[i], "compiled output names differ from the program's");
    check(cp.outputs[i].second >= 0 && static_cast<size_t>(cp.outputs[i].second) < nv, "output value id out of range");
  }
  for (const auto& [name, v] : cp.inputs) {
    check(v >= 0 && static_cast<size_t>(v) < nv, "input value id out of range");
  }
  check(cp.peak_bytes >= 0, "negative memory plan");
}

bool same_compiled(const CompiledProgram& a, const CompiledProgram& b) {
  if (a.values.size() != b.values.size() || a.nodes.size() != b.nodes.size() || a.outputs != b.outputs ||
      a.inputs != b.inputs || a.peak_bytes != b.peak_bytes) {
    return false;
  }
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i].meta.dtype != b.values[i].meta.dtype || a.values[i].meta.shape != b.values[i].meta.shape) {
      return false;
    }
  }
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].id != b.nodes[i].id || a.nodes[i].tensor_params != b.nodes[i].tensor_params) return false;
  }
  return true;
}

}  // namespace
}  // namespace tensord::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  using namespace tensord::fuzz;
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  JobSpec spec;
  if (!expect_ok_or({ErrorCode::kBadRequest, ErrorCode::kInvalidProgram}, "parsing a /v1/run body", [&] {
        rapidjson::Document d = parse_json_object(body, "body");
        spec = job_spec_from_json(d, {});
      })) {
    return 0;
  }

  std::map<std::string, TensorMeta> input_metas;
  for (const auto& [name, t] : spec.inputs) input_metas[name] = t.meta();
  const std::initializer_list<ErrorCode> compile_codes = {
      ErrorCode::kBadRequest,    ErrorCode::kInvalidProgram, ErrorCode::kUnknownOp,       ErrorCode::kNotFound,
      ErrorCode::kShapeMismatch, ErrorCode::kDtypeMismatch,  ErrorCode::kInvalidArgument, ErrorCode::kUnsupported};
  CompiledProgram cp;
  if (!expect_ok_or(compile_codes, "compile_program",
                    [&] { cp = compile_program(spec.program, input_metas, lookup); })) {
    return 0;
  }
  check_compiled(cp, spec.program);

  CompiledProgram again;
  expect_no_throw("compiling the same program again",
                  [&] { again = compile_program(spec.program, input_metas, lookup); });
  check(same_compiled(cp, again), "compiling the same program twice gave different results");
  return 0;
}
