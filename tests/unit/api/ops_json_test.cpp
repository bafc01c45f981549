#include "api/ops_json.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/dtype.h"

namespace tensord {
namespace {

std::string str(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// What GET /v1/ops renders: the registry's ops and the control-flow ops.
rapidjson::Document rendered() {
  std::vector<OpListing> ops;
  for (const OpDef* op : OpRegistry::global().all()) ops.push_back(op_listing(*op));
  for (const auto& cf : control_flow_op_specs()) ops.push_back(op_listing(cf, {"cpu"}));
  std::string json = ops_to_json(ops);
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(json.c_str(), json.size());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

std::map<std::string, const rapidjson::Value*> by_name(const rapidjson::Document& d) {
  std::map<std::string, const rapidjson::Value*> m;
  for (const auto& o : d["ops"].GetArray()) m[str(o["name"])] = &o;
  return m;
}

TEST(OpsJson, EveryOpHasADtypeListOfNames) {
  rapidjson::Document d = rendered();
  ASSERT_FALSE(d.HasParseError());
  std::string prev;
  for (const auto& o : d["ops"].GetArray()) {
    const std::string name = str(o["name"]);
    EXPECT_LT(prev, name) << "sorted by name";
    prev = name;
    ASSERT_TRUE(o["dtypes"].IsArray()) << name;
    EXPECT_GT(o["dtypes"].Size(), 0u) << name;
    for (const auto& t : o["dtypes"].GetArray()) EXPECT_TRUE(dtype_from_name(str(t))) << name << ": " << str(t);
    EXPECT_TRUE(o["dtype_note"].IsString()) << name;
    EXPECT_FALSE(str(o["signature"]).empty()) << name;
    EXPECT_TRUE(o["params"].IsArray() && o["outputs"].IsArray() && o["backends"].IsArray()) << name;
    EXPECT_TRUE(o["subprograms"].IsArray()) << name;
  }
}

TEST(OpsJson, ListsTheControlFlowOps) {
  rapidjson::Document d = rendered();
  ASSERT_FALSE(d.HasParseError());
  auto ops = by_name(d);
  const std::map<std::string, std::vector<std::string>> subprograms = {{"cond", {"then", "else"}},
                                                                       {"while_loop", {"cond", "body"}},
                                                                       {"scan", {"body"}},
                                                                       {"map", {"body"}},
                                                                       {"associative_scan", {"combine_fn"}}};
  for (const auto& [name, subs] : subprograms) {
    ASSERT_TRUE(ops.count(name)) << name;
    const rapidjson::Value& o = *ops[name];
    EXPECT_EQ(o["dtypes"].Size(), static_cast<rapidjson::SizeType>(kNumDTypes)) << name;
    std::vector<std::string> got;
    for (const auto& s : o["subprograms"].GetArray()) got.push_back(str(s));
    EXPECT_EQ(got, subs) << name;
    EXPECT_EQ(str(o["backends"][0]), "cpu") << name;
    EXPECT_EQ(str(o["signature"]).rfind(name + "(", 0), 0u) << name;
  }
  EXPECT_EQ(str((*ops["scan"])["params"][2]["name"]), "dim");
  EXPECT_EQ(str((*ops["scan"])["params"][2]["default"]), "0");
  EXPECT_TRUE((*ops["scan"])["params"][2]["kwarg_only"].GetBool());
}

TEST(OpsJson, RegistryOpsKeepTheirFields) {
  rapidjson::Document d = rendered();
  ASSERT_FALSE(d.HasParseError());
  auto ops = by_name(d);
  const rapidjson::Value& eigh = *ops.at("linalg.eigh");
  std::vector<std::string> dts;
  for (const auto& t : eigh["dtypes"].GetArray()) dts.push_back(str(t));
  EXPECT_EQ(dts, (std::vector<std::string>{"float32", "float64", "complex64", "complex128"}));
  EXPECT_EQ(str(eigh["params"][1]["name"]), "UPLO");
  EXPECT_EQ(str(eigh["params"][1]["default"]), "\"L\"");
  EXPECT_FALSE(eigh["params"][1]["required"].GetBool());
  EXPECT_EQ(str(eigh["outputs"][1]), "eigenvectors");
  EXPECT_FALSE(eigh["in_place"].GetBool());
  EXPECT_TRUE((*ops.at("copy_"))["in_place"].GetBool());
  EXPECT_EQ((*ops.at("add"))["subprograms"].Size(), 0u);
  std::set<std::string> backends;
  for (const auto& b : (*ops.at("add"))["backends"].GetArray()) backends.insert(str(b));
  EXPECT_TRUE(backends.count("cpu"));
}

}  // namespace
}  // namespace tensord
