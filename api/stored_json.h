// Bodies of the stored-tensor routes (API.md 3.3): what PUT, GET
// /v1/tensors?prefix=, POST /v1/tensors:upload and POST /v1/checkpoint
// answer. The tensors themselves are api/json_tensor.h's.
#pragma once

#include <string>
#include <vector>

#include "api/checkpoint.h"
#include "scheduler/tensor_store.h"

namespace tensord {

// {"name", "dtype", "shape", "bytes"}: PUT /v1/tensors/{name}. An MX tensor
// shows its format as dtype, its logical shape, its packed bytes (elements
// and scales) and adds "block_size" and "axis".
std::string stored_info_to_json(const StoredInfo& info);
// {"tensors": [{"name", "dtype", "shape", "bytes"}, ...]}: GET /v1/tensors.
std::string stored_list_to_json(const std::vector<StoredInfo>& list);
// {"stored": [{"name", "dtype", "shape", "bytes"}, ...]}: POST /v1/tensors:upload.
std::string upload_result_to_json(const std::vector<StoredInfo>& stored);
// {"path", "tensors", "bytes"}: POST /v1/checkpoint.
std::string checkpoint_info_to_json(const CheckpointInfo& info);

}  // namespace tensord
