// Ranks as threads in one process: R GlooProcessGroups over loopback joined
// through one in-process store, and a runner that bounds every test.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ops/dist/gloo_process_group.h"
#include "ops/error.h"
#include "ops/tensor.h"

namespace tensord::dist::testing {

using namespace std::chrono_literals;

// No test may hang: a rank body still running after this is a failure that
// ends the process (ctest reports it), never a stuck suite.
inline constexpr auto kWatchdog = std::chrono::seconds(20);

// Runs body(r) on R threads and rethrows the first failure.
inline void on_ranks(int R, const std::function<void(int)>& body) {
  std::vector<std::future<void>> fs;
  for (int r = 0; r < R; ++r) fs.push_back(std::async(std::launch::async, body, r));
  const auto until = std::chrono::steady_clock::now() + kWatchdog;
  for (auto& f : fs) {
    if (f.wait_until(until) != std::future_status::ready) {
      std::fprintf(stderr, "dist test: a rank did not finish within %lld s\n",
                   static_cast<long long>(kWatchdog.count()));
      std::_Exit(3);
    }
  }
  for (auto& f : fs) f.get();
}

struct Groups {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::vector<std::shared_ptr<FlightRecorder>> recorders;
  std::vector<std::unique_ptr<GlooProcessGroup>> pgs;
  GlooProcessGroup& operator[](int r) { return *pgs[static_cast<size_t>(r)]; }
};

using StoreForRank = std::function<std::shared_ptr<gloo::rendezvous::Store>(int rank)>;

// R ranks of one group; `timeout`: each collective's. The ranks share one
// store, or each opens its own (`store_for_rank`), as separate processes
// would.
inline Groups make_groups(int R, std::chrono::milliseconds timeout = 5000ms, size_t fr_capacity = 2048,
                          std::shared_ptr<gloo::rendezvous::Store> store = nullptr,
                          const StoreForRank& store_for_rank = {}) {
  Groups g;
  g.store = store ? store : make_hash_store();
  g.pgs.resize(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) g.recorders.push_back(std::make_shared<FlightRecorder>(r, fr_capacity));
  on_ranks(R, [&](int r) {
    ProcessGroupOptions o;
    o.timeout = timeout;
    o.recorder = g.recorders[static_cast<size_t>(r)];
    GlooOptions go;
    go.store = store_for_rank ? store_for_rank(r) : g.store;
    go.rendezvous_timeout = 5000ms;
    g.pgs[static_cast<size_t>(r)] = std::make_unique<GlooProcessGroup>(r, R, o, go);
  });
  return g;
}

template <class T>
DType dtype_of();
template <>
inline DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
inline DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
inline DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
inline DType dtype_of<int64_t>() {
  return DType::kInt64;
}

template <class T>
Tensor make(const Shape& shape, const std::vector<T>& v) {
  Tensor t = Tensor::empty_host(dtype_of<T>(), shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

// Runs f and returns the tensord::Error it throws (fails when none).
inline Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorCode::kInternal, "no error");
}

}  // namespace tensord::dist::testing
