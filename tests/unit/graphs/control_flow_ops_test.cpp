// The published schema of the control-flow ops (GET /v1/ops) says what the
// parser takes: every documented operand, keyword and subprogram is
// accepted, and every documented subprogram is required.
#include "graphs/control_flow_ops.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "graphs/control_flow.h"
#include "ops/error.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

// A node written the way the spec documents it: one name per operand
// param, every keyword at its default, every subprogram.
Node documented_node(const ControlFlowOpSpec& s) {
  Node n;
  n.id = "n";
  n.op = s.name;
  n.outputs = {"out"};
  for (const ParamSpec& p : s.params) {
    if (!p.kwarg_only) {
      n.args.push_back(ref(p.name));
    } else if (p.kind == ParamKind::kString) {
      n.kwargs.emplace_back(p.name, ref(p.default_value.to_string(p.name.c_str())));
    } else {
      n.kwargs.emplace_back(p.name, lit(p.default_value));
    }
  }
  for (const auto& k : s.subprograms) n.subprograms[k] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
  return n;
}

std::string parse_error(const Node& n) {
  std::vector<ArgExpr> operands;
  try {
    parse_control_flow(n, &operands);
  } catch (const Error& e) {
    return e.message();
  }
  return {};
}

TEST(ControlFlowOps, TheFiveOps) {
  std::set<std::string> names;
  for (const auto& s : control_flow_op_specs()) {
    names.insert(s.name);
    EXPECT_TRUE(is_control_flow_op(s.name)) << s.name;
    ASSERT_NE(control_flow_op_def(s.name), nullptr) << s.name;
    EXPECT_EQ(s.dtypes, dtypes_all()) << s.name;
    EXPECT_EQ(s.signature.rfind(s.name + "(", 0), 0u) << s.name;
    EXPECT_FALSE(s.subprograms.empty()) << s.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"cond", "while_loop", "scan", "map", "associative_scan"}));
}

TEST(ControlFlowOps, TheParserTakesWhatTheSpecSays) {
  for (const auto& s : control_flow_op_specs()) {
    Node n = documented_node(s);
    EXPECT_EQ(parse_error(n), "") << s.name;
    for (const auto& k : s.subprograms) {
      Node missing = n;
      missing.subprograms.erase(k);
      EXPECT_NE(parse_error(missing).find("needs a \"" + k + "\" subprogram"), std::string::npos) << s.name << " " << k;
    }
    Node extra = n;
    extra.subprograms["zzz"] = sub({{"a", meta(DType::kFloat32, {2})}}, {}, {"a"});
    EXPECT_NE(parse_error(extra).find("takes no \"zzz\" subprogram"), std::string::npos) << s.name;
    Node kw = n;
    kw.kwargs.emplace_back("no_such_kwarg", lit(Attr(int64_t{1})));
    EXPECT_NE(parse_error(kw).find("unexpected keyword argument 'no_such_kwarg'"), std::string::npos) << s.name;
  }
}

}  // namespace
}  // namespace tensord
