// Which GPUs a build's CUDA kernels run on: the architecture list the build
// compiled (CMAKE_CUDA_ARCHITECTURES, e.g. "80-real;86-real;90;120") against
// a device's compute capability. Host code, no CUDA: the CUDA backend asks
// before it takes a device (make_cuda_backend), and the rules are unit-tested
// on a machine without a GPU.
//   sm_XY (SASS, "XY" or "XY-real") runs on X.Z for Z >= Y (binary
//     compatibility within a major version); sm_XYa only on X.Y; sm_XYf on
//     X.Z, Z >= Y (the family).
//   compute_XY (PTX, "XY" or "XY-virtual") is compiled by the driver for
//     any device of capability >= X.Y; compute_XYa only for X.Y,
//     compute_XYf for X.Z, Z >= Y.
// "all", "all-major", "native" and anything unparsable leave the list
// unknown: no device is refused for it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tensord {

struct CudaArch {
  int cc = 0;         // 10 * major + minor: 86 for sm_86
  char variant = 0;   // 0, 'a' (arch-specific) or 'f' (family)
  bool sass = false;  // machine code for sm_<cc>
  bool ptx = false;   // PTX for compute_<cc>
};

struct CudaArchList {
  std::vector<CudaArch> archs;
  bool unknown = false;  // a special or unparsable entry: trust the build
  std::string text;      // as given
};

// Entries separated by ';', ',' or spaces.
CudaArchList parse_cuda_architectures(std::string_view list);

// Whether code in `built` runs on a device of capability major.minor.
bool cuda_arch_runs(int major, int minor, const CudaArchList& built);

// Empty when device `index` (`name`, capability major.minor) runs the
// build's kernels; otherwise why not, naming the device and the list.
std::string cuda_device_refusal(int index, std::string_view name, int major, int minor, const CudaArchList& built);

}  // namespace tensord
