// Program IR: the shape of torch.export's graph (API.md section 4), as parsed
// from JSON by api/program_json.cpp. No JSON here.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/attr.h"
#include "ops/tensor.h"

namespace tensord {

// One argument as written: the binder decides what it means from the op's
// schema (a string is a value name for a Tensor param, a literal for str).
struct ArgExpr {
  enum class Kind {
    kNull,
    kString,      // "x", "$stored/w", "L", "float32"
    kStringList,  // ["a", "b"] (also the empty list [])
    kLiteral,     // number, bool, list of numbers
    kTensor,      // inline JSON tensor
  };
  Kind kind = Kind::kNull;
  std::string str;
  std::vector<std::string> strs;
  Attr literal;
  Tensor tensor;
};

struct Program;

struct Node {
  std::string id;
  std::string op;
  std::vector<ArgExpr> args;
  std::vector<std::pair<std::string, ArgExpr>> kwargs;
  std::vector<std::string> outputs;
  // Control-flow bodies by role ("then", "else", "cond", "body").
  std::map<std::string, std::shared_ptr<const Program>> subprograms;
};

struct ProgramInput {
  std::string name;
  TensorMeta meta;
  // The declaration gave a dtype alone (API.md 8: an SPMD program's
  // per-rank or sharded input): the input's own shape is taken.
  bool any_shape = false;
};

struct Program {
  std::vector<ProgramInput> inputs;  // in declaration order
  std::vector<Node> nodes;           // in any order
  std::vector<std::string> outputs;
};

// Prefix of an argument that names a stored tensor of the tenant.
inline constexpr const char* kStoredPrefix = "$stored/";

}  // namespace tensord
