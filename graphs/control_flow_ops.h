// What each control-flow op takes (API.md 4.2), as GET /v1/ops publishes
// it: operands, keyword arguments and subprograms as parse_control_flow
// (graphs/control_flow.h) reads them. These ops have no entry in the op
// registry and no kernels: the compiler binds their operands and the
// executor runs their compiled bodies, on whatever backend runs the rest.
#pragma once

#include <string>
#include <vector>

#include "ops/dtype_list.h"
#include "ops/op_registry.h"

namespace tensord {

struct ControlFlowOpSpec {
  std::string name;
  // PyTorch style; operands given as a list of names may also be given one
  // name at a time ("args": ["pred", "x", "y"]).
  std::string signature;
  std::string doc;
  std::vector<ParamSpec> params;
  std::vector<std::string> outputs;      // each one a list of tensors
  std::vector<std::string> subprograms;  // the node's program-valued keys, e.g. {"then", "else"}
  DTypeList dtypes;                      // every dtype: the bodies' ops decide
  std::string dtype_note;
};

// cond, while_loop, scan, map, associative_scan (by name).
const std::vector<ControlFlowOpSpec>& control_flow_op_specs();

}  // namespace tensord
