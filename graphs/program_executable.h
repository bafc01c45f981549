// A compiled program run by the executor (execute_program): a /v1/run job,
// or a captured graph's replay on a device where the device graph could not
// capture it. Immutable: run() may be called from several threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "graphs/executable.h"

namespace tensord {

class ProgramExecutable final : public Executable {
 public:
  explicit ProgramExecutable(std::shared_ptr<const CompiledProgram> cp) : cp_(std::move(cp)) {}
  ExecResult run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) override;
  const CompiledProgram& program() const override { return *cp_; }

 private:
  std::shared_ptr<const CompiledProgram> cp_;
};

}  // namespace tensord
