// GET /v1/ops (API.md 5): every op with its signature, parameters, the
// dtypes it accepts (a list of names) and the backends it runs on.
#pragma once

#include <string>
#include <vector>

#include "graphs/control_flow_ops.h"
#include "ops/op_registry.h"

namespace tensord {

// One entry of the list.
struct OpListing {
  std::string name;
  std::string signature;
  std::string doc;
  DTypeList dtypes;
  std::string dtype_note;
  std::vector<ParamSpec> params;
  std::vector<std::string> outputs;
  bool in_place = false;
  std::vector<std::string> backends;
  std::vector<std::string> subprograms;  // control flow only
};

// A registry op: it runs on the backends that have a kernel for it.
OpListing op_listing(const OpDef& op);
// A control-flow op: it runs wherever its bodies' ops run, on `backends`.
OpListing op_listing(const ControlFlowOpSpec& op, std::vector<std::string> backends);

// {"ops": [{"name", "signature", "doc", "dtypes": [dtype names],
// "dtype_note", "params": [{"name", "type", "required", "default"?,
// "kwarg_only"}], "outputs", "in_place", "backends", "subprograms"}]},
// sorted by name.
std::string ops_to_json(std::vector<OpListing> ops);

}  // namespace tensord
