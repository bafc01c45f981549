// The request span of /v1/trace (metrics/trace_buffer.h): one per HTTP
// request that the session wraps around its handler.
#pragma once

#include <cstdint>
#include <string>

namespace tensord {

// A request span on the calling thread, recorded when the scope ends (the
// HTTP session wraps each handler call). Holds references: `method` and
// `route` are read at the end (the router fills the route). Requests for
// health, metrics and trace routes are not recorded unless they submitted a job.
class TraceRequestScope {
 public:
  TraceRequestScope(const std::string& method, const std::string& route, const std::string& request_id);
  ~TraceRequestScope();
  TraceRequestScope(const TraceRequestScope&) = delete;
  TraceRequestScope& operator=(const TraceRequestScope&) = delete;

  // The scope of the calling thread, or nullptr.
  static TraceRequestScope* current();
  // No longer the calling thread's scope (an asynchronous request whose
  // handler returned): the span goes on until the destructor, which may
  // then run on any thread. The referenced strings must live until then.
  void detach();
  // The calling thread's scope again until detach() (a detached request's
  // work continuing on another thread: a job it submits there joins its
  // span). Not while another thread has it attached.
  void attach();
  // The request submitted a job: its span belongs to `tenant`; a flow starts here.
  void add_job(const std::string& tenant, uint64_t flow_id, const std::string& job_id);
  uint32_t lane() const { return lane_; }

 private:
  const std::string& method_;
  const std::string& route_;
  const std::string& request_id_;
  int64_t start_ns_;
  uint32_t lane_;
  uint32_t njobs_ = 0;
  uint64_t job_ = 0;        // the first job's N, when it is "job-N"
  bool plain_jobs_ = true;  // one job, named "job-N": the span needs no strings
  std::string tenant_;
  std::string jobs_;  // comma-separated; only kept once plain_jobs_ is false
  TraceRequestScope* outer_;
  bool detached_ = false;
};

}  // namespace tensord
