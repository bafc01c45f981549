// What a world's coordinator sends the servers holding a group's other
// ranks, and what they answer (API.md 8; docs/api-notes.md "Collectives").
// The part is the whole request (program as received, every input, the
// group) plus which members the peer runs and the key its members meet
// under; the answer is a /v1/run reply whose per-rank outputs hold those
// members' values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ops/error.h"
#include "ops/tensor.h"
#include "scheduler/job_spec.h"

namespace tensord {

// The forwarded request's JSON body.
std::string spmd_part_to_json(const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
                              const std::string& key, int64_t deadline_ms);

// A peer's reply: each output with one tensor (replicated) or one per
// member, in the part's member order. An error reply is thrown as the
// Error it names (its code, message and node).
std::vector<std::pair<std::string, std::vector<Tensor>>> spmd_part_outputs_from_json(int status, std::string& body);

// The code named by an error reply's "code"; nullopt for an unknown name.
std::optional<ErrorCode> error_code_from_name(std::string_view name);

}  // namespace tensord
