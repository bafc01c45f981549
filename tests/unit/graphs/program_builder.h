// Small helpers to write Program IR by hand in tests.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graphs/program.h"

namespace tensord::testing_util {

inline ArgExpr ref(std::string s) {
  ArgExpr a;
  a.kind = ArgExpr::Kind::kString;
  a.str = std::move(s);
  return a;
}
inline ArgExpr refs(std::vector<std::string> s) {
  ArgExpr a;
  a.kind = ArgExpr::Kind::kStringList;
  a.strs = std::move(s);
  return a;
}
inline ArgExpr lit(Attr v) {
  ArgExpr a;
  a.kind = ArgExpr::Kind::kLiteral;
  a.literal = std::move(v);
  return a;
}
inline Node node(std::string id, std::string op, std::vector<ArgExpr> args, std::vector<std::string> outs,
                 std::vector<std::pair<std::string, ArgExpr>> kwargs = {}) {
  Node n;
  n.id = std::move(id);
  n.op = std::move(op);
  n.args = std::move(args);
  n.outputs = std::move(outs);
  n.kwargs = std::move(kwargs);
  return n;
}
inline TensorMeta meta(DType d, Shape s) {
  TensorMeta m;
  m.dtype = d;
  m.shape = std::move(s);
  return m;
}
// A subprogram (cond branches, loop bodies, combine functions).
inline std::shared_ptr<const Program> sub(std::vector<ProgramInput> inputs, std::vector<Node> nodes,
                                          std::vector<std::string> outputs) {
  auto p = std::make_shared<Program>();
  p->inputs = std::move(inputs);
  p->nodes = std::move(nodes);
  p->outputs = std::move(outputs);
  return p;
}
inline Tensor f32(Shape shape, std::vector<float> v) {
  Tensor t = Tensor::empty_host(DType::kFloat32, std::move(shape));
  std::memcpy(t.data(), v.data(), v.size() * 4);
  return t;
}

}  // namespace tensord::testing_util
