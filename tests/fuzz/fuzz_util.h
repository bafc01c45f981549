// Shared checks of the libFuzzer targets (tests/fuzz/*_fuzz.cpp): what
// counts as a bug beyond a crash. A parser may refuse any input, but only
// with a tensord::Error carrying one of the codes its contract documents
// (API.md 2); any other exception type, an undocumented code, an empty
// message, or a broken round trip aborts, which libFuzzer reports as a crash
// and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>

#include "ops/error.h"
#include "ops/tensor.h"

namespace tensord::fuzz {

// Prints why and aborts (libFuzzer saves the input as crash-<sha1>).
[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void check(bool cond, const std::string& why) {
  if (!cond) fail(why);
}

// An Error from `where` must carry one of `allowed` and say something.
inline void check_error(const Error& e, std::initializer_list<ErrorCode> allowed, const char* where) {
  bool ok = false;
  for (ErrorCode c : allowed) ok |= (e.code() == c);
  if (!ok) {
    fail(std::string(where) + " threw undocumented code " + std::string(error_code_name(e.code())) + ": " +
         e.message());
  }
  if (e.message().empty()) fail(std::string(where) + " threw an Error without a message");
}

// Runs f(); an Error must have one of `allowed` codes (returns false), any
// other exception aborts. Returns true when f() returned normally.
template <class F>
bool expect_ok_or(std::initializer_list<ErrorCode> allowed, const char* where, F&& f) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    check_error(e, allowed, where);
    return false;
  } catch (const std::exception& e) {
    fail(std::string(where) + " threw a non-tensord exception: " + e.what());
  } catch (...) {
    fail(std::string(where) + " threw a non-exception");
  }
}

// Runs f(), which must not throw at all.
template <class F>
void expect_no_throw(const char* where, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    fail(std::string(where) + " threw " + std::string(error_code_name(e.code())) + ": " + e.message());
  } catch (const std::exception& e) {
    fail(std::string(where) + " threw: " + e.what());
  } catch (...) {
    fail(std::string(where) + " threw a non-exception");
  }
}

// Same dtype, shape and bytes.
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.nbytes() != b.nbytes()) return false;
  return a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace tensord::fuzz
