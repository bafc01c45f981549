// A JSON tensor body with a b64 payload, decoded into its tensor: the copied
// parse (parse_json on a view) against the in-place one (parse_json_insitu on
// the body) and against memcpy of the same bytes, the floor. Median of the
// runs, in GB/s of body bytes (bench/README.md, "datapath").
//
//   build/bench/json_ingest_bench [MiB of tensor (default 64)] [runs (default 7)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/base64.h"
#include "api/json_tensor.h"

namespace {

template <class F>
double median_seconds(int runs, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 7;
  const size_t n = mib << 18;  // float32 elements
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 1000) * 0.25f;
  const std::string body = "{\"dtype\": \"float32\", \"shape\": [" + std::to_string(n) + "], \"b64\": \"" +
                           tensord::base64_encode(data.data(), n * 4) + "\"}";
  const double gb = static_cast<double>(body.size()) / 1e9;

  std::string dst(body.size(), '\0');
  const double floor_s = median_seconds(runs, [&] { std::memcpy(dst.data(), body.data(), body.size()); });
  const double view_s = median_seconds(runs, [&] {
    tensord::Tensor t = tensord::tensor_from_json_string(body, "body");
    if (t.numel() != static_cast<int64_t>(n)) std::abort();
  });
  std::vector<std::string> copies(static_cast<size_t>(runs), body);  // in place consumes its body
  size_t k = 0;
  const double insitu_s = median_seconds(runs, [&] {
    tensord::Tensor t = tensord::tensor_from_json_body(copies[k++], "body");
    if (t.numel() != static_cast<int64_t>(n) || t.data_ptr<float>()[n - 1] != data[n - 1]) std::abort();
  });
  std::printf("json_ingest: %zu MiB tensor, %.1f MiB body, median of %d\n", mib, gb * 1e3 / 1.048576, runs);
  std::printf("| path | ms | GB/s of body | x memcpy |\n|---|---|---|---|\n");
  std::printf("| memcpy (floor) | %.1f | %.2f | 1.0 |\n", floor_s * 1e3, gb / floor_s);
  std::printf("| parse_json, copied | %.1f | %.2f | %.1f |\n", view_s * 1e3, gb / view_s, view_s / floor_s);
  std::printf("| parse_json_insitu | %.1f | %.2f | %.1f |\n", insitu_s * 1e3, gb / insitu_s, insitu_s / floor_s);
  return 0;
}
