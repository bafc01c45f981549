// The HTTP server's own metrics (API.md section 9), registered on
// metrics_registry() by this component (STYLE.md item 11):
//   tensord_http_requests_total{route, method, code}     counter
//   tensord_http_request_duration_seconds{route}         histogram, 100us..60s
// `route` is the route template, "unmatched" when no route matched; `method`
// is a standard method name or "other", so label cardinality stays bounded.
#pragma once

#include <memory>
#include <string_view>

namespace tensord {

class HttpMetrics {
 public:
  // The process-wide instance (registers the families on first use).
  static HttpMetrics& global();

  HttpMetrics();
  ~HttpMetrics();
  HttpMetrics(const HttpMetrics&) = delete;
  HttpMetrics& operator=(const HttpMetrics&) = delete;

  // Records one response. Thread-safe and lock-free once the calling thread
  // has recorded the same (route, method, code): handles are cached per thread.
  void record(std::string_view route, std::string_view method, int status, double seconds);

  static constexpr std::string_view kUnmatchedRoute = "unmatched";

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord
