// Attr: a non-tensor argument value (int, float, bool, string, lists).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ops/dtype.h"

namespace tensord {

class Attr {
 public:
  using Value =
      std::variant<std::monostate, int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;
  Attr() = default;
  Attr(int64_t v) : v_(v) {}                          // NOLINT(google-explicit-constructor)
  Attr(int v) : v_(int64_t{v}) {}                     // NOLINT(google-explicit-constructor)
  Attr(double v) : v_(v) {}                           // NOLINT(google-explicit-constructor)
  Attr(bool v) : v_(v) {}                             // NOLINT(google-explicit-constructor)
  Attr(std::string v) : v_(std::move(v)) {}           // NOLINT(google-explicit-constructor)
  Attr(const char* v) : v_(std::string(v)) {}         // NOLINT(google-explicit-constructor)
  Attr(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attr(std::vector<double> v) : v_(std::move(v)) {}   // NOLINT(google-explicit-constructor)

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_int_list() const { return std::holds_alternative<std::vector<int64_t>>(v_); }
  bool is_double_list() const { return std::holds_alternative<std::vector<double>>(v_); }
  bool is_number() const { return is_int() || is_double() || is_bool(); }

  // Accessors convert where PyTorch would (int -> double, bool -> int);
  // they throw invalid_argument naming `what` when the kind is wrong.
  int64_t to_int(const char* what) const;
  double to_double(const char* what) const;
  bool to_bool(const char* what) const;
  const std::string& to_string(const char* what) const;
  std::vector<int64_t> to_int_list(const char* what) const;  // a single int becomes [int]
  std::vector<double> to_double_list(const char* what) const;
  DType to_dtype(const char* what) const;

  const Value& value() const { return v_; }
  std::string repr() const;  // for /v1/ops defaults and messages

 private:
  Value v_;
};

}  // namespace tensord
