#include "ops/attr.h"

#include <cmath>
#include <sstream>

#include "ops/error.h"

namespace tensord {
namespace {
[[noreturn]] void bad(const char* what, const char* want) {
  throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": expected " + want);
}
}  // namespace

int64_t Attr::to_int(const char* what) const {
  if (is_int()) return std::get<int64_t>(v_);
  if (is_bool()) return std::get<bool>(v_) ? 1 : 0;
  if (is_double()) {
    double d = std::get<double>(v_);
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  bad(what, "an integer");
}

double Attr::to_double(const char* what) const {
  if (is_double()) return std::get<double>(v_);
  if (is_int()) return static_cast<double>(std::get<int64_t>(v_));
  if (is_bool()) return std::get<bool>(v_) ? 1.0 : 0.0;
  bad(what, "a number");
}

bool Attr::to_bool(const char* what) const {
  if (is_bool()) return std::get<bool>(v_);
  if (is_int()) {
    int64_t i = std::get<int64_t>(v_);
    if (i == 0 || i == 1) return i == 1;
  }
  bad(what, "a bool");
}

const std::string& Attr::to_string(const char* what) const {
  if (is_string()) return std::get<std::string>(v_);
  bad(what, "a string");
}

std::vector<int64_t> Attr::to_int_list(const char* what) const {
  if (is_int_list()) return std::get<std::vector<int64_t>>(v_);
  if (is_int()) return {std::get<int64_t>(v_)};
  bad(what, "a list of integers");
}

std::vector<double> Attr::to_double_list(const char* what) const {
  if (is_double_list()) return std::get<std::vector<double>>(v_);
  if (is_int_list()) {
    const auto& l = std::get<std::vector<int64_t>>(v_);
    return std::vector<double>(l.begin(), l.end());
  }
  if (is_number()) return {to_double(what)};
  bad(what, "a list of numbers");
}

DType Attr::to_dtype(const char* what) const {
  if (!is_string()) bad(what, "a dtype name");
  auto t = dtype_from_name(std::get<std::string>(v_));
  if (!t)
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": unknown dtype '" + std::get<std::string>(v_) + "'");
  return *t;
}

std::string Attr::repr() const {
  std::ostringstream os;
  os.precision(17);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          os << "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << v << '"';
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
          os << '[';
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << ']';
        } else {
          os << v;
        }
      },
      v_);
  return os.str();
}

}  // namespace tensord
