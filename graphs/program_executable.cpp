#include "graphs/program_executable.h"

namespace tensord {

ExecResult ProgramExecutable::run(const std::map<std::string, Tensor>& inputs, const ExecOptions& opts) {
  return execute_program(*cp_, inputs, opts);
}

}  // namespace tensord
