// Work that is not a program, run as a job (Engine::run_task_async: a
// graph's capture): the task runs with the job's options on its partition
// runner; what it throws fails the job. Its effects are its own (a capture
// stores its graph): the engine commits nothing and answers no outputs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "graphs/executable.h"

namespace tensord {

class TaskExecutable final : public Executable {
 public:
  explicit TaskExecutable(std::function<void(const ExecOptions&)> task) : task_(std::move(task)) {}
  ExecResult run(const std::map<std::string, Tensor>& /*inputs*/, const ExecOptions& opts) override {
    task_(opts);
    return {};
  }
  const CompiledProgram& program() const override { return empty_program(); }
  bool commits() const override { return false; }

 private:
  std::function<void(const ExecOptions&)> task_;
};

}  // namespace tensord
