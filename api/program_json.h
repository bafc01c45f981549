// Program and /v1/run request parsing (API.md section 4) and response
// encoding. JSON stays in api/: callers get typed JobSpec / Program values.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "api/http_types.h"
#include "graphs/program.h"
#include "scheduler/job_spec.h"
#include "scheduler/job.h"

namespace tensord {

// Parses a JSON body with the safe flags; not an object -> bad_request.
rapidjson::Document parse_json_object(std::string_view body, const char* what);
// The same in place: the document's strings point into `body`, which must
// outlive it (a request body: its b64 inputs are decoded from there).
rapidjson::Document parse_json_object_insitu(std::string& body, const char* what);
// The same into `d` (a BodyDocument's, api/json_document.h).
void parse_json_object_insitu(std::string& body, rapidjson::Document& d, const char* what);

// A program object -> Program (structure only; meaning is checked by
// compile_program). Malformed structure -> bad_request / invalid_program.
Program program_from_json(const rapidjson::Value& v, int depth = 0);

// Applies one top-level field of a run/replay request ("inputs", "store",
// "return", "deadline_ms", "priority", "ranks") to `s`; false for any other
// key. Malformed values throw bad_request.
bool apply_request_field(JobSpec& s, const std::string& key, const rapidjson::Value& v);
// Throws 400 bad_request naming an unknown top-level request field.
[[noreturn]] void unknown_request_field(const std::string& key);

// A /v1/run body (already parsed) -> JobSpec. `file_inputs` are tensors that
// came in a safetensors body; JSON "inputs" may add more.
JobSpec job_spec_from_json(const rapidjson::Value& req, std::map<std::string, Tensor> file_inputs);
// The same from bytes, so that routes never hold a document: a JSON body
// (parsed in place: `body` is left as RapidJSON's in-situ parse leaves it),
// or the request text of a safetensors body (its __metadata__["request"],
// `what` naming it in errors) with the file's tensors.
JobSpec job_spec_from_json_body(std::string& body);
// A request's "program" written back compactly: what program_sha256 hashes
// (a run's and a graph capture's alike).
std::string program_json_text(const rapidjson::Value& program);

JobSpec job_spec_from_json_text(std::string_view request, const char* what, std::map<std::string, Tensor> file_inputs);

// {"outputs": {...}, "job": {...}}. With tensors_inline = false the outputs
// object lists only names -> {dtype, shape} (the safetensors response form).
std::string job_result_to_json(const JobResult& r, bool tensors_inline, bool use_b64);
// The same text with the tensors inline, as a response body that leaves
// from the writer's buffer (a large b64 output is not copied again).
std::vector<BodyView> job_result_to_json_body(const JobResult& r, bool use_b64);

// POST /v1/jobs' 202: {"id", "state": "queued"} (Engine::submit never
// runs the job before it returns).
std::string job_accepted_to_json(const std::string& id);

// GET /v1/jobs/{id}: {"id", "state", "tenant", "partition", "queue_ms",
// "run_ms", "error"? {code, message, node}, "outputs"?, "job"?}. Outputs and
// job details appear once the job succeeded.
std::string job_status_to_json(const Job& job, bool use_b64);

}  // namespace tensord
