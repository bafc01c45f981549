// The flight recorder's dump as PyTorch's pickle file, loaded by Python.
#include "api/flight_recorder_pickle.h"

#include <gtest/gtest.h>

#include "ops/dist/flight_recorder.h"
#include "tests/unit/api/python_pickle_loader.h"

namespace tensord::dist {
namespace {

FlightRecorderDump sample() {
  FlightRecorderDump d;
  d.version = "2.10";
  d.comm_lib_version = "gloo";
  d.rank = 1;
  d.groups.push_back({"world", "world", 0, {0, 1, 2}, 2, 2, 1});
  d.groups.push_back({"ranks:1,2", "tp \xc3\xa9", 3, {1, 2}, -1, -1, -1});
  FlightRecord a;
  a.record_id = 4;
  a.pg_id = 0;
  a.pg_name = "world";
  a.pg_desc = "world";
  a.collective_seq_id = 1;
  a.op_id = 1;
  a.profiling_name = "gloo:all_reduce";
  a.time_created_ns = 1700000000123456789;
  a.input_sizes = {{3, 4}};
  a.input_dtypes = {DType::kFloat32};
  a.output_sizes = {{3, 4}};
  a.output_dtypes = {DType::kFloat32};
  a.time_discovered_started_ns = 1700000000200000000;
  a.time_discovered_completed_ns = 1700000000300000000;
  a.retired = true;
  a.timeout_ms = 60000;
  d.entries.push_back(a);
  FlightRecord b = a;
  b.record_id = 5;
  b.collective_seq_id = 2;
  b.op_id = 2;
  b.profiling_name = "gloo:all_gather";
  b.input_sizes = {{2}};
  b.input_dtypes = {DType::kInt64};
  b.output_sizes = {{6}};
  b.output_dtypes = {DType::kInt64};
  b.time_discovered_started_ns.reset();
  b.time_discovered_completed_ns.reset();
  b.retired = false;
  d.entries.push_back(b);
  FlightRecord c;  // a barrier: no tensors
  c.record_id = 6;
  c.pg_id = 3;
  c.pg_name = "ranks:1,2";
  c.pg_desc = "tp \xc3\xa9";
  c.collective_seq_id = 1;
  c.op_id = 1;
  c.profiling_name = "gloo:barrier";
  c.time_created_ns = 5;
  c.time_discovered_started_ns = 6;
  c.timeout_ms = 1000;
  d.entries.push_back(c);
  return d;
}

TEST(FlightRecorderPickle, PyTorchLayoutLoadsInPython) {
  if (!testing_pickle::have_python()) GTEST_SKIP() << "no " << testing_pickle::kPython << " to load the pickle";
  const auto r = testing_pickle::python_load(flight_recorder_pickle(sample()));
  ASSERT_TRUE(r.ok) << r.out;
  const std::string common = "'pg_id': 0, 'process_group': ('world', 'world'), ";
  EXPECT_EQ(r.out,
            "{'version': '2.10', 'comm_lib_version': 'gloo', 'rank': 1, "
            "'pg_config': {'world': {'name': 'world', 'desc': 'world', 'ranks': '[0, 1, 2]'}, "
            "'ranks:1,2': {'name': 'ranks:1,2', 'desc': 'tp \xc3\xa9', 'ranks': '[1, 2]'}}, "
            "'pg_status': {'world': {'last_enqueued_collective': 2, 'last_started_collective': 2, "
            "'last_completed_collective': 1}, 'ranks:1,2': {'last_enqueued_collective': -1, "
            "'last_started_collective': -1, 'last_completed_collective': -1}}, "
            "'entries': [{'record_id': 4, " +
                common +
                "'collective_seq_id': 1, 'p2p_seq_id': 0, 'op_id': 1, 'profiling_name': 'gloo:all_reduce', "
                "'time_created_ns': 1700000000123456789, 'input_sizes': [[3, 4]], 'input_dtypes': ['Float'], "
                "'output_sizes': [[3, 4]], 'output_dtypes': ['Float'], 'state': 'completed', "
                "'time_discovered_started_ns': 1700000000200000000, "
                "'time_discovered_completed_ns': 1700000000300000000, 'retired': True, 'timeout_ms': 60000, "
                "'is_p2p': False, 'frames': []}, "
                "{'record_id': 5, " +
                common +
                "'collective_seq_id': 2, 'p2p_seq_id': 0, 'op_id': 2, 'profiling_name': 'gloo:all_gather', "
                "'time_created_ns': 1700000000123456789, 'input_sizes': [[2]], 'input_dtypes': ['Long'], "
                "'output_sizes': [[6]], 'output_dtypes': ['Long'], 'state': 'scheduled', "
                "'time_discovered_started_ns': None, 'time_discovered_completed_ns': None, 'retired': False, "
                "'timeout_ms': 60000, 'is_p2p': False, 'frames': []}, "
                "{'record_id': 6, 'pg_id': 3, 'process_group': ('ranks:1,2', 'tp \xc3\xa9'), "
                "'collective_seq_id': 1, 'p2p_seq_id': 0, 'op_id': 1, 'profiling_name': 'gloo:barrier', "
                "'time_created_ns': 5, 'input_sizes': [], 'input_dtypes': [], 'output_sizes': [], "
                "'output_dtypes': [], 'state': 'started', 'time_discovered_started_ns': 6, "
                "'time_discovered_completed_ns': None, 'retired': False, 'timeout_ms': 1000, 'is_p2p': False, "
                "'frames': []}]}");
}

TEST(FlightRecorderPickle, FromARecorderEmptyAndFull) {
  if (!testing_pickle::have_python()) GTEST_SKIP() << "no " << testing_pickle::kPython << " to load the pickle";
  // An empty recorder, and one that wrapped (the oldest entries evicted).
  FlightRecorder empty(0, 4);
  auto r = testing_pickle::python_load(flight_recorder_pickle(empty.dump()));
  ASSERT_TRUE(r.ok) << r.out;
  EXPECT_NE(r.out.find("'pg_config': {}, 'pg_status': {}, 'entries': []}"), std::string::npos) << r.out;

  FlightRecorder fr(2, 3);
  fr.register_group("world", "world", 0, {0, 1, 2});
  for (int i = 1; i <= 5; ++i) {
    FlightRecord e;
    e.pg_name = "world";
    e.pg_desc = "world";
    e.collective_seq_id = static_cast<uint64_t>(i);
    e.profiling_name = "gloo:all_reduce";
    fr.completed(fr.record(e));
  }
  r = testing_pickle::python_load(flight_recorder_pickle(fr.dump()));
  ASSERT_TRUE(r.ok) << r.out;
  EXPECT_NE(r.out.find("'rank': 2"), std::string::npos) << r.out;
  // Records 2, 3 and 4 (from 0), oldest first.
  const size_t r2 = r.out.find("'record_id': 2,"), r3 = r.out.find("'record_id': 3,"),
               r4 = r.out.find("'record_id': 4,");
  EXPECT_EQ(r.out.find("'record_id': 1,"), std::string::npos) << r.out;
  ASSERT_NE(r2, std::string::npos);
  EXPECT_LT(r2, r3);
  EXPECT_LT(r3, r4);
}

}  // namespace
}  // namespace tensord::dist
