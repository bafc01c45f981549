#include "ops/cuda_arch.h"

#include <cctype>

namespace tensord {
namespace {

// One entry: "<digits>[a|f][-real|-virtual]"; false when it is not one.
bool parse_entry(std::string_view e, CudaArch& out) {
  std::string_view kind;
  if (auto dash = e.find('-'); dash != std::string_view::npos) {
    kind = e.substr(dash + 1);
    e = e.substr(0, dash);
  }
  size_t i = 0;
  int cc = 0;
  while (i < e.size() && std::isdigit(static_cast<unsigned char>(e[i])) && cc < 10000) {
    cc = cc * 10 + (e[i] - '0');
    ++i;
  }
  if (i == 0 || cc < 10) return false;
  char variant = 0;
  if (i < e.size() && (e[i] == 'a' || e[i] == 'f')) variant = e[i++];
  if (i != e.size()) return false;
  out.cc = cc;
  out.variant = variant;
  if (kind.empty()) {
    out.sass = out.ptx = true;
  } else if (kind == "real") {
    out.sass = true;
  } else if (kind == "virtual") {
    out.ptx = true;
  } else {
    return false;
  }
  return true;
}

bool variant_runs(char variant, int built_major, int built_minor, int major, int minor) {
  if (variant == 'a') return major == built_major && minor == built_minor;
  return major == built_major && minor >= built_minor;  // plain SASS, or the 'f' family
}

}  // namespace

CudaArchList parse_cuda_architectures(std::string_view list) {
  CudaArchList out;
  out.text = std::string(list);
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find_first_of(";, ", pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view e = list.substr(pos, end - pos);
    pos = end + 1;
    if (e.empty()) continue;
    CudaArch a;
    if (parse_entry(e, a)) {
      out.archs.push_back(a);
    } else {
      out.unknown = true;  // "all", "all-major", "native", or something new
    }
  }
  if (out.archs.empty()) out.unknown = true;
  return out;
}

bool cuda_arch_runs(int major, int minor, const CudaArchList& built) {
  if (built.unknown) return true;
  for (const CudaArch& a : built.archs) {
    const int bmaj = a.cc / 10, bmin = a.cc % 10;
    if (a.sass && variant_runs(a.variant, bmaj, bmin, major, minor)) return true;
    if (a.ptx) {
      if (a.variant == 0 ? major * 10 + minor >= a.cc : variant_runs(a.variant, bmaj, bmin, major, minor)) return true;
    }
  }
  return false;
}

std::string cuda_device_refusal(int index, std::string_view name, int major, int minor, const CudaArchList& built) {
  if (cuda_arch_runs(major, minor, built)) return {};
  return "CUDA device " + std::to_string(index) + " (" + std::string(name) + ", compute capability " +
         std::to_string(major) + "." + std::to_string(minor) + ") runs none of this build's kernels (built for " +
         built.text + "); rebuild with CMAKE_CUDA_ARCHITECTURES including " + std::to_string(major) +
         std::to_string(minor);
}

}  // namespace tensord
