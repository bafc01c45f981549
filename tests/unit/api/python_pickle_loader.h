// Loads a pickle with Debian's Python (/usr/bin/python3) for the pickle
// tests: both of Python's unpicklers (the C one and the pure-Python one)
// with every class refused, and pickletools.dis, which checks the opcode
// stream's marks and stack. Answers repr() of the value, or the error.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace tensord::testing_pickle {

inline constexpr const char* kPython = "/usr/bin/python3";

inline bool have_python() {
  return ::access(kPython, X_OK) == 0;
}

struct Loaded {
  bool ok = false;
  std::string out;  // repr() of the value, or Python's error
};

inline Loaded python_load(const std::string& pickle) {
  namespace fs = std::filesystem;
  static int counter = 0;
  const fs::path dir = fs::temp_directory_path();
  const std::string stem = "tensord-pickle-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const fs::path data = dir / (stem + ".pkl");
  const fs::path script = dir / (stem + ".py");
  std::ofstream(data, std::ios::binary) << pickle;
  std::ofstream(script) << R"PY(import io, pickle, pickletools, sys
class C(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refused class %s.%s" % (module, name))
class P(pickle._Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refused class %s.%s" % (module, name))
b = open(sys.argv[1], "rb").read()
a = C(io.BytesIO(b)).load()
p = P(io.BytesIO(b)).load()
assert repr(a) == repr(p), (repr(a), repr(p))
pickletools.dis(b, out=io.StringIO())
sys.stdout.write(repr(a))
)PY";
  const std::string cmd = std::string(kPython) + " " + script.string() + " " + data.string() + " 2>&1";
  Loaded r;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    r.ok = ::pclose(p) == 0;
  }
  fs::remove(data);
  fs::remove(script);
  return r;
}

}  // namespace tensord::testing_pickle
