// KServe v2 (Open Inference Protocol) bodies over captured graphs (API.md
// 11): server and model metadata, inference requests with the binary tensor
// data extension in, responses with it out. JSON stays in api/: callers get
// typed values; every malformed request throws Error(kBadRequest) with a
// message that names the input or output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphs/program.h"
#include "ops/tensor.h"

namespace tensord {

struct KServeTensorInfo {
  std::string name;
  TensorMeta meta;
};

// A captured graph as a model: its name (the graph's name, else its id) and
// its inputs and outputs in declaration order.
struct KServeModel {
  std::string name;
  std::vector<KServeTensorInfo> inputs;
  std::vector<KServeTensorInfo> outputs;
};

// KServe's datatype for a dtype (BOOL UINT8 INT8 INT16 INT32 INT64 FP16
// BF16 FP32 FP64); nullopt for the others (complex, float8).
std::optional<std::string_view> kserve_datatype(DType t);
// The dtype of a KServe datatype name (exactly as spelled above).
std::optional<DType> dtype_from_kserve(std::string_view datatype);
// Throws bad_request naming the input when a BOOL tensor holds a byte other
// than 0 or 1.
void check_kserve_bool_bytes(const Tensor& t, const std::string& name);
// Throws bad_request naming the first input or output whose dtype KServe
// has no datatype for: such a model answers metadata but not inference.
void check_kserve_dtypes(const KServeModel& m);

// GET /v2: {name: "tensord", version, extensions} (the extensions the
// routes implement, as Triton names them).
std::string kserve_server_metadata_json(const std::string& version, const std::vector<std::string_view>& extensions);
// GET /v2/models/{model}: {name, versions: ["1"], platform: "tensord",
// inputs: [{name, datatype, shape}], outputs: [...]}; a dtype KServe lacks
// shows its tensord name.
std::string kserve_model_metadata_json(const KServeModel& m);
// GET /v2/models/{model}/ready: {name, ready: true}.
std::string kserve_model_ready_json(const std::string& name);

// A tensor's bytes in a registered system shared memory region (API.md
// 11.1): the region's name, and the slice of it, relative to the region.
struct KServeShmRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

struct KServeOutputRequest {
  std::string name;
  bool binary = false;              // answered with the binary tensor data extension
  std::optional<KServeShmRef> shm;  // written into a region instead (then not binary)
};

struct KServeShmInput {
  std::string name;
  KServeShmRef ref;  // byte_size checked against the input's shape and datatype
};

struct KServeInferRequest {
  std::optional<std::string> id;  // echoed in the response
  std::map<std::string, Tensor> inputs;
  // The outputs to answer, in order: the ones the request names, else all
  // the model's.
  std::vector<KServeOutputRequest> outputs;
  bool outputs_named = false;  // the request named its outputs
  // Inputs whose bytes are in shared memory: `inputs` holds a host tensor of
  // the input's dtype and shape for each, for the caller to read the region
  // into.
  std::vector<KServeShmInput> shm_inputs;
  int64_t timeout_us = 0;  // parameters.timeout (microseconds); 0: none
};

// The value of an Inference-Header-Content-Length header: nullopt when
// absent (empty); a non-number is bad_request.
std::optional<size_t> parse_inference_header_length(const std::string& value);

// An infer body for model `m`: the JSON request, the whole body or its first
// `header_length` bytes, then each binary input's bytes in input order.
// Checks every input against the model (name, datatype, shape; all present,
// none twice), binary_data_size against shape and datatype, the body's
// length against the header and the sizes, and the requested outputs
// against the model's. `body` may be parsed in place (left unusable).
KServeInferRequest kserve_infer_from_body(std::string& body, std::optional<size_t> header_length, const KServeModel& m);

// An infer response: `header` is the JSON; `binary` the tensors whose bytes
// follow it, in order (empty: a plain JSON response).
struct KServeInferResponse {
  std::string header;
  std::vector<Tensor> binary;
};
// {model_name, model_version: "1", id?, outputs: [{name, datatype, shape,
// data | parameters: {binary_data_size} | parameters: {shared_memory_region,
// shared_memory_byte_size, shared_memory_offset?}}]} for host tensors.
KServeInferResponse kserve_infer_response(const std::string& model, const std::optional<std::string>& id,
                                          const std::vector<std::pair<KServeOutputRequest, Tensor>>& outputs);

}  // namespace tensord
