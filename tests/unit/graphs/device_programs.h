// Control-flow programs over float32 values only, so that a device whose
// kernels take float32 (the fake kernels, CUDA's) can capture them whole:
// device_graph_test.cpp and tests/unit/cuda/graph_test.cpp.
#pragma once

#include <vector>

#include "tests/unit/graphs/program_builder.h"

namespace tensord::testing_util {

inline const TensorMeta kVec = meta(DType::kFloat32, {3});
inline const TensorMeta kOne = meta(DType::kFloat32, {});

// while s < limit: s = s + 1, x = x * 2   (float32 carries)
inline Node float_while(int64_t max_iters = -1) {
  Node n = node("w", "while_loop", {ref("s"), ref("x"), ref("limit")}, {"s2", "x2", "l2"});
  if (max_iters >= 0) n.kwargs.emplace_back("max_iters", lit(Attr(max_iters)));
  std::vector<ProgramInput> in = {{"s", kOne}, {"x", kVec}, {"limit", kOne}};
  n.subprograms["cond"] = sub(in, {node("c", "lt", {ref("s"), ref("limit")}, {"b"})}, {"b"});
  n.subprograms["body"] = sub(
      in, {node("a", "add", {ref("s"), lit(Attr(1.0))}, {"t"}), node("m", "mul", {ref("x"), lit(Attr(2.0))}, {"y"})},
      {"t", "y", "limit"});
  return n;
}

// cond(p, x): then x * 2, else x + 1.
inline Node float_cond() {
  Node n = node("c", "cond", {ref("p"), ref("x")}, {"y"});
  n.subprograms["then"] = sub({{"a", kVec}}, {node("m", "mul", {ref("a"), lit(Attr(2.0))}, {"r"})}, {"r"});
  n.subprograms["else"] = sub({{"a", kVec}}, {node("n", "add", {ref("a"), lit(Attr(1.0))}, {"r"})}, {"r"});
  return n;
}

}  // namespace tensord::testing_util
