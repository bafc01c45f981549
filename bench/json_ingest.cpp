// A JSON tensor body with a b64 payload, decoded into its tensor: the copied
// parse (parse_json on a view) against the in-place one (parse_json_insitu on
// the body) and against memcpy of the same bytes, the floor. Then a body of
// numeric "data" (random float32 values written as Python writes them, the
// shortest text that reads back): the DOM path and the one-pass one
// (api/json_numbers.h) against std::from_chars reading the same numbers, the
// floor for decimal text. Median of the runs, in GB/s of body bytes
// (bench/README.md, "datapath").
//
//   build/bench/json_ingest_bench [MiB of tensor (default 64)] [runs (default 7)]
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

// `mib` MiB of float32 as numeric "data": each value's shortest text (17
// digits as a rule), or (`short_text`) rounded to 4 decimals as a person
// or a CSV export writes them.
void numbers(size_t mib, int runs, bool short_text) {
  const size_t n = mib << 18;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> data(n);
  std::string text = "[";
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    double v = normal(rng);
    if (short_text) v = std::round(v * 1e4) / 1e4;
    data[i] = static_cast<float>(v);
    auto r = short_text ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 4)
                        : std::to_chars(buf, buf + sizeof buf, static_cast<double>(data[i]));  // as Python's repr
    if (i) text += ", ";
    text.append(buf, r.ptr);
  }
  text += "]";
  const std::string body = "{\"dtype\": \"float32\", \"shape\": [" + std::to_string(n) + "], \"data\": " + text + "}";
  const double gb = static_cast<double>(body.size()) / 1e9;
  std::vector<float> out(n);
  const double floor_s = median_seconds(runs, [&] {
    const char* p = text.data() + 1;
    const char* end = text.data() + text.size();
    for (size_t i = 0; i < n; ++i) {
      double d;
      p = std::from_chars(p, end, d).ptr;
      out[i] = static_cast<float>(d);
      p += 2;
    }
  });
  if (out[n - 1] != data[n - 1]) std::abort();
  const double dom_s = median_seconds(runs, [&] {
    tensord::Tensor t = tensord::tensor_from_json_string(body, "body");
    if (t.numel() != static_cast<int64_t>(n)) std::abort();
  });
  std::vector<std::string> copies(static_cast<size_t>(runs), body);
  size_t k = 0;
  const double fast_s = median_seconds(runs, [&] {
    tensord::Tensor t = tensord::tensor_from_json_body(copies[k++], "body");
    if (t.numel() != static_cast<int64_t>(n) || t.data_ptr<float>()[n - 1] != data[n - 1]) std::abort();
  });
  std::printf("\njson_ingest: %zu MiB tensor as numeric data (%s), %.1f MiB body, median of %d\n", mib,
              short_text ? "4 decimals" : "shortest text", gb * 1e3 / 1.048576, runs);
  std::printf("| path | ms | GB/s of body | x from_chars |\n|---|---|---|---|\n");
  std::printf("| from_chars of the numbers (floor) | %.1f | %.2f | 1.0 |\n", floor_s * 1e3, gb / floor_s);
  std::printf("| DOM (parse_json) | %.1f | %.2f | %.1f |\n", dom_s * 1e3, gb / dom_s, dom_s / floor_s);
  std::printf("| one pass (json_numbers) | %.1f | %.2f | %.1f |\n", fast_s * 1e3, gb / fast_s, fast_s / floor_s);
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
  numbers(mib / 4, runs, false);
  numbers(mib / 4, runs, true);
  return 0;
}
