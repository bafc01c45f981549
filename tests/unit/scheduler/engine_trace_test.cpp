// The engine's trace hooks (engine_trace.cpp) write what /v1/trace shows:
// the records of a job, its op spans' args (node, op, job, graph, shapes)
// from a table built once per program, and the whole-record slow path for
// jobs not named "job-N". Uses the process-wide ring (like the engine).
#include "scheduler/engine_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graphs/compiled_program.h"
#include "metrics/trace_buffer.h"
#include "metrics/trace_request_scope.h"
#include "scheduler/job.h"
#include "tests/unit/graphs/program_builder.h"

namespace tensord {
namespace {
using namespace testing_util;

CompiledProgram tiny_program(const std::string& first_id = "a") {
  Program p;
  p.nodes.push_back(node(first_id, "mul", {ref("x"), ref("x")}, {"y"}));
  p.nodes.push_back(node("s", "sum", {ref("y")}, {"t"}));
  p.outputs = {"t"};
  TensorMeta x;
  x.shape = {2, 3};
  return compile_program(p, {{"x", x}}, [](const std::string&) { return std::nullopt; });
}

// Runs `job` through the hooks as the engine does (no request around it).
void run_job(Job& job, const CompiledProgram& cp, const std::string& graph = {}) {
  engine_trace::job_queued(job);
  job.start();
  engine_trace::job_started(job, graph);
  for (const auto& b : cp.nodes) engine_trace::op_ran(cp, cp, b, 1e-6);
  job.succeed(JobResult{});
  engine_trace::job_ended(job);
}

// Job numbers no other test (or --gtest_repeat run) uses: the ring is process-wide.
uint64_t fresh_jobs() {
  static std::atomic<uint64_t> next{700000};
  return next.fetch_add(100000);
}

std::string jid(uint64_t n) {
  return "job-" + std::to_string(n);
}

std::vector<TraceRecord> records_of(const std::string& job) {
  return TraceBuffer::global().snapshot(TraceBuffer::kDefaultCapacity, [&](const TraceRecord& r) {
    return r.name.find(job) != std::string::npos || r.args.find("\"" + job + "\"") != std::string::npos;
  });
}

const TraceRecord* find(const std::vector<TraceRecord>& rs, const std::string& cat, const std::string& name) {
  auto it = std::find_if(rs.begin(), rs.end(), [&](const TraceRecord& r) { return r.cat == cat && r.name == name; });
  return it == rs.end() ? nullptr : &*it;
}

TEST(EngineTrace, RecordsAJobsSpansWithTheirArgs) {
  CompiledProgram cp = tiny_program("n\"q");
  const uint64_t n = fresh_jobs() + 1;
  const std::string id = jid(n);
  Job job(id, "alice", "interactive");
  run_job(job, cp);
  auto rs = records_of(id);
  const TraceRecord* submit = find(rs, "request", "submit " + id);
  ASSERT_NE(submit, nullptr);
  EXPECT_EQ(submit->args, "{\"job\":\"" + id + "\",\"tenant\":\"alice\",\"partition\":\"interactive\"}");
  const TraceRecord* mul = find(rs, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->args, "{\"node\":\"n\\\"q\",\"op\":\"mul\",\"job\":\"" + id +
                           "\",\"inputs\":[\"float32[2, 3]\",\"float32[2, "
                           "3]\"],\"outputs\":[\"float32[2, 3]\"]}");
  EXPECT_EQ(mul->tenant, "alice");
  const TraceRecord* sum = find(rs, "op", "sum");
  ASSERT_NE(sum, nullptr);
  EXPECT_NE(sum->args.find("\"outputs\":[\"float32[]\"]"), std::string::npos) << sum->args;
  const TraceRecord* run = find(rs, "job", "run " + id);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->args,
            "{\"job\":\"" + id + "\",\"tenant\":\"alice\",\"partition\":\"interactive\",\"state\":\"succeeded\"}");
  EXPECT_EQ(mul->tid, run->tid);
  EXPECT_LE(run->ts_ns, mul->ts_ns);
  const TraceRecord* queued = find(rs, "queue", "queued " + id);
  ASSERT_NE(queued, nullptr);
  EXPECT_EQ(queued->ph, 'b');
  EXPECT_EQ(queued->id, n);
  // Flows: submit -> run (2n), run -> first op (2n + 1).
  auto flows = TraceBuffer::global().snapshot(TraceBuffer::kDefaultCapacity, [&](const TraceRecord& r) {
    return r.cat == "flow" && (r.id == 2 * n || r.id == 2 * n + 1);
  });
  ASSERT_EQ(flows.size(), 4u);
  int starts = 0;
  for (const auto& f : flows) {
    starts += f.ph == 's';
    EXPECT_EQ(f.tenant, "alice");
    EXPECT_EQ(f.name, f.id == 2 * n ? "job" : "ops");
  }
  EXPECT_EQ(starts, 2);
}

TEST(EngineTrace, ReplaysNameTheirGraphAndShareOneTable) {
  CompiledProgram cp = tiny_program();
  const uint64_t base = fresh_jobs();
  const size_t before = TraceBuffer::global().retained();
  for (int i = 0; i < 50; ++i) {
    Job job(jid(base + static_cast<uint64_t>(i)), "alice", "interactive");
    run_job(job, cp, "g-71");
  }
  // One table for the 50 replays of the graph (a few more at most, from other tests' data).
  EXPECT_LE(TraceBuffer::global().retained(), before + 3);
  const std::string last = jid(base + 49);
  auto rs = records_of(last);
  const TraceRecord* mul = find(rs, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_NE(mul->args.find("\"job\":\"" + last + "\",\"graph\":\"g-71\",\"inputs\""), std::string::npos) << mul->args;
  const TraceRecord* run = find(rs, "job", "run " + last);
  ASSERT_NE(run, nullptr);
  EXPECT_NE(run->args.find(",\"state\":\"succeeded\",\"graph\":\"g-71\"}"), std::string::npos) << run->args;
  // The same program without the graph: no graph in its args.
  Job plain(jid(base + 99), "alice", "interactive");
  run_job(plain, cp);
  rs = records_of(plain.id());
  mul = find(rs, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->args.find("graph"), std::string::npos) << mul->args;
}

// A loop's body nodes, reported against their own program (as the executor
// and the replay plans report them): their spans name the body's node and
// its shapes, the run span keeps the job's program and graph, and the body's
// table is built once for the job, however many trips.
TEST(EngineTrace, ControlFlowBodyNodesGetTheirSubprogramsTable) {
  CompiledProgram job_cp = tiny_program();
  Program body;
  body.nodes.push_back(node("inner", "neg", {ref("v")}, {"w"}));
  body.outputs = {"w"};
  CompiledProgram body_cp = compile_program(body, {{"v", TensorMeta{DType::kFloat32, {7}}}}, nullptr);
  const uint64_t n = fresh_jobs() + 1;
  const std::string id = jid(n);
  Job job(id, "alice", "interactive");
  engine_trace::job_queued(job);
  job.start();
  engine_trace::job_started(job, "g-5");
  const size_t before = TraceBuffer::global().retained();
  for (int trip = 0; trip < 100; ++trip) engine_trace::op_ran(job_cp, body_cp, body_cp.nodes[0], 1e-7);
  EXPECT_LE(TraceBuffer::global().retained(), before + 1) << "one table for the body, not one per trip";
  for (const auto& b : job_cp.nodes) engine_trace::op_ran(job_cp, job_cp, b, 1e-6);
  job.succeed(JobResult{});
  engine_trace::job_ended(job);
  auto rs = records_of(id);
  const TraceRecord* inner = find(rs, "op", "neg");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->args, "{\"node\":\"inner\",\"op\":\"neg\",\"job\":\"" + id +
                             "\",\"graph\":\"g-5\",\"inputs\":[\"float32[7]\"],\"outputs\":[\"float32[7]\"]}");
  EXPECT_EQ(std::count_if(rs.begin(), rs.end(), [](const TraceRecord& r) { return r.cat == "op" && r.name == "neg"; }),
            100);
  const TraceRecord* run = find(rs, "job", "run " + id);
  ASSERT_NE(run, nullptr);
  EXPECT_NE(run->args.find("\"graph\":\"g-5\""), std::string::npos) << run->args;
}

TEST(EngineTrace, AProgramOfOtherShapesGetsItsOwnTable) {
  CompiledProgram cp = tiny_program();
  const uint64_t base = fresh_jobs();
  Job a(jid(base + 1), "alice", "interactive");
  run_job(a, cp);
  Program p;
  p.nodes.push_back(node("a", "mul", {ref("x"), ref("x")}, {"y"}));
  p.nodes.push_back(node("s", "sum", {ref("y")}, {"t"}));
  p.outputs = {"t"};
  TensorMeta x;
  x.shape = {5};
  CompiledProgram other = compile_program(p, {{"x", x}}, [](const std::string&) { return std::nullopt; });
  Job b(jid(base + 2), "alice", "interactive");
  run_job(b, other);
  const auto rb = records_of(b.id());
  const TraceRecord* mul = find(rb, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_NE(mul->args.find("\"inputs\":[\"float32[5]\",\"float32[5]\"]"), std::string::npos) << mul->args;
  const auto ra = records_of(a.id());
  mul = find(ra, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_NE(mul->args.find("\"inputs\":[\"float32[2, 3]\""), std::string::npos) << mul->args;
}

// A table is reused without checking the nodes again only for the program
// object it was checked against (CompiledProgram::serial): another program
// built in the same memory, or a copy, is checked again.
TEST(EngineTrace, AProgramBuiltWhereAnotherWasIsCheckedAgain) {
  auto program_of = [](std::vector<int64_t> shape) {
    Program p;
    p.nodes.push_back(node("a", "mul", {ref("x"), ref("x")}, {"y"}));
    p.nodes.push_back(node("s", "sum", {ref("y")}, {"t"}));
    p.outputs = {"t"};
    TensorMeta x;
    x.shape = std::move(shape);
    return compile_program(p, {{"x", x}}, [](const std::string&) { return std::nullopt; });
  };
  std::optional<CompiledProgram> slot;  // the same address for both programs
  const uint64_t base = fresh_jobs();
  slot.emplace(program_of({2, 3}));
  const CompiledProgram* first = &*slot;
  Job a(jid(base + 1), "alice", "interactive");
  run_job(a, *slot);
  const uint64_t first_serial = slot->serial.value();
  slot.reset();
  slot.emplace(program_of({5}));
  ASSERT_EQ(&*slot, first);
  EXPECT_NE(slot->serial.value(), first_serial);
  Job b(jid(base + 2), "alice", "interactive");
  run_job(b, *slot);
  const auto rb = records_of(b.id());
  const TraceRecord* mul = find(rb, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_NE(mul->args.find("\"inputs\":[\"float32[5]\",\"float32[5]\"]"), std::string::npos) << mul->args;
  const CompiledProgram copy = *slot;
  EXPECT_NE(copy.serial.value(), slot->serial.value()) << "a copy is another object";
}

TEST(EngineTrace, JobsNamedOtherwiseTakeTheSlowPath) {
  CompiledProgram cp = tiny_program();
  const uint64_t n = fresh_jobs() + 731;
  const std::string id = "batch-0" + std::to_string(n);
  Job job(id, "bob", "batch");
  run_job(job, cp);
  auto rs = records_of(id);
  const TraceRecord* run = find(rs, "job", "run " + id);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->args, "{\"job\":\"" + id + "\",\"tenant\":\"bob\",\"partition\":\"batch\",\"state\":\"succeeded\"}");
  const TraceRecord* mul = find(rs, "op", "mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_NE(mul->args.find("\"job\":\"" + id + "\""), std::string::npos);
  const TraceRecord* queued = find(rs, "queue", "queued " + id);
  ASSERT_NE(queued, nullptr);
  EXPECT_EQ(queued->id, n);  // the number after the last dash, as flow ids use
}

TEST(EngineTrace, RequestSpansCarryTheirJob) {
  CompiledProgram cp = tiny_program();
  const std::string method = "POST", route = "/v1/run";
  const uint64_t base = fresh_jobs();
  for (const std::string rid : {"0123456789abcdef", "client's own id"}) {
    Job job(jid(base + (rid[0] == '0' ? 1 : 2)), "alice", "interactive");
    {
      TraceRequestScope scope(method, route, rid);
      run_job(job, cp);
    }
    auto reqs = TraceBuffer::global().snapshot(TraceBuffer::kDefaultCapacity, [&](const TraceRecord& r) {
      return r.cat == "request" && r.args.find(job.id()) != std::string::npos;
    });
    ASSERT_EQ(reqs.size(), 1u) << rid;
    EXPECT_EQ(reqs[0].name, "POST /v1/run");
    EXPECT_EQ(reqs[0].tenant, "alice");
    EXPECT_EQ(reqs[0].args, "{\"request_id\":\"" + rid + "\",\"jobs\":\"" + job.id() + "\"}");
  }
}

TEST(EngineTrace, RunnersOnManyThreadsKeepTheirOwnRecords) {
  CompiledProgram cp = tiny_program();
  const uint64_t base = fresh_jobs();
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        Job job(jid(base + static_cast<uint64_t>(t * 1000 + i)), "t" + std::to_string(t), "p");
        run_job(job, cp, t % 2 ? "g-74" : "");
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < 4; ++t) {
    const std::string id = jid(base + static_cast<uint64_t>(t * 1000 + 199));
    auto rs = records_of(id);
    const TraceRecord* mul = find(rs, "op", "mul");
    ASSERT_NE(mul, nullptr) << id;
    EXPECT_EQ(mul->tenant, "t" + std::to_string(t));
    EXPECT_EQ(mul->args.find("\"graph\":\"g-74\"") != std::string::npos, t % 2 == 1) << mul->args;
  }
}

}  // namespace
}  // namespace tensord
