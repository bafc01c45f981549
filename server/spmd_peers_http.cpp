#include "server/spmd_peers_http.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/http/parser.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "api/spmd_part_json.h"
#include "ops/dist/store.h"
#include "ops/error.h"
#include "server/beast.h"

namespace tensord {

namespace {

std::string rank_key(int g, int n) {
  return "tensord/rank/" + std::to_string(g) + "/" + std::to_string(n);
}

struct Url {
  std::string host, port;
};

Url parse_url(const std::string& url) {
  const std::string prefix = "http://";
  TENSORD_CHECK(url.rfind(prefix, 0) == 0, kInternal, "a peer's URL is not http://: " + url);
  std::string rest = url.substr(prefix.size());
  const auto slash = rest.find('/');
  if (slash != std::string::npos) rest.resize(slash);
  const auto colon = rest.rfind(':');
  TENSORD_CHECK(colon != std::string::npos, kInternal, "a peer's URL has no port: " + url);
  Url u{rest.substr(0, colon), rest.substr(colon + 1)};
  if (u.host.size() > 2 && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  return u;
}

std::string members_str(const std::vector<int>& group, const std::vector<size_t>& members) {
  std::string s;
  for (size_t m : members) s += (s.empty() ? "" : ",") + std::to_string(group[m]);
  return s;
}

}  // namespace

SpmdPeersHttp::SpmdPeersHttp(const StoreFactory& make_store, std::chrono::milliseconds lookup_timeout,
                             std::chrono::milliseconds keep_every)
    : make_store_(make_store), lookup_timeout_(lookup_timeout), keep_every_(keep_every) {}

SpmdPeersHttp::~SpmdPeersHttp() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  keep_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
}

gloo::rendezvous::Store& SpmdPeersHttp::store() {
  if (!store_) store_ = make_store_();
  return *store_;
}

void SpmdPeersHttp::write_rank(int g) {
  // A store's keys are written once (Redis: SETNX): a server that starts
  // again takes the next free slot, and lookups read the last one.
  int n = 0;
  while (dist::store_has_key(store(), rank_key(g, n))) ++n;
  dist::store_set(store(), rank_key(g, n), url_);
  slots_[g] = n;
}

std::optional<Error> SpmdPeersHttp::register_ranks(const std::string& url, int first, int count) {
  std::lock_guard lk(mu_);
  url_ = url;
  for (int g = first; g < first + count; ++g) slots_[g] = -1;
  std::optional<Error> failed;
  try {
    for (auto& [g, slot] : slots_) write_rank(g);
  } catch (const Error& e) {
    store_.reset();
    failed = e;
  }
  if (!keeper_.joinable()) keeper_ = std::thread([this] { keep_loop(); });
  return failed;
}

void SpmdPeersHttp::keep_loop() {
  std::unique_lock lk(mu_);
  while (!keep_cv_.wait_for(lk, keep_every_, [this] { return stopping_; })) {
    try {
      for (auto& [g, slot] : slots_) {
        // Never written (the store was gone at start), or lost with a store
        // that came back empty.
        if (slot < 0 || !dist::store_has_key(store(), rank_key(g, slot))) write_rank(g);
      }
    } catch (const Error&) {
      store_.reset();  // gone: tried again next time
    }
  }
}

std::string SpmdPeersHttp::lookup(int g) {
  try {
    int n = 0;
    while (dist::store_has_key(store(), rank_key(g, n))) ++n;
    return n > 0 ? dist::store_get(store(), rank_key(g, n - 1)) : std::string();
  } catch (const Error&) {
    store_.reset();  // a new connection next time: the store may be back
    throw;
  }
}

std::string SpmdPeersHttp::server_of(int g) {
  std::lock_guard lk(mu_);
  const auto until = std::chrono::steady_clock::now() + lookup_timeout_;
  const auto known = known_.find(g);
  for (;;) {
    std::string url;
    try {
      url = lookup(g);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnavailable || known == known_.end()) throw;
      return known->second;
    }
    if (!url.empty()) {
      known_[g] = url;
      return url;
    }
    if (known != known_.end()) return known->second;
    if (std::chrono::steady_clock::now() >= until) {
      throw Error(ErrorCode::kUnavailable, "rank " + std::to_string(g) + "'s server has not joined the world");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::pair<std::string, std::vector<Tensor>>> SpmdPeersHttp::run_part(
    const std::string& server, const JobSpec& spec, const std::vector<int>& group, const std::vector<size_t>& members,
    const std::string& key, std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  const bool bounded = deadline != std::chrono::steady_clock::time_point::max();
  const int64_t left_ms =
      bounded ? std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) : 0;
  const std::string who = "ranks " + members_str(group, members) + " (server " + server + ")";
  http::request<http::string_body> req{http::verb::post, "/v1/run", 11};
  req.set(http::field::host, server);
  req.set(http::field::content_type, "application/json");
  if (!spec.authorization.empty()) req.set(http::field::authorization, spec.authorization);
  req.set("X-Request-Id", spec.request_id);
  req.body() = spmd_part_to_json(spec, group, members, key, left_ms);
  req.prepare_payload();
  http::response<http::string_body> res;
  try {
    const Url u = parse_url(server);
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    // The stream's expiry bounds every step (sync calls ignore it: the
    // steps are asynchronous, run here). Without a deadline the peer's own
    // collective timeout ends a stalled part; this bounds a peer that
    // never answers at all.
    stream.expires_after(bounded ? std::chrono::milliseconds(left_ms) : std::chrono::hours(24));
    beast::error_code failed;
    stream.async_connect(resolver.resolve(u.host, u.port), [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) {
        failed = ec;
        return;
      }
      http::async_write(stream, req, [&](beast::error_code ec2, size_t) {
        if (ec2) {
          failed = ec2;
          return;
        }
        http::async_read(stream, buf, parser, [&](beast::error_code ec3, size_t) { failed = ec3; });
      });
    });
    ioc.run();
    if (failed) throw beast::system_error(failed);
    res = parser.release();
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  } catch (const Error&) {
    throw;
  } catch (const beast::system_error& e) {
    // A peer that died (refused, reset) or stalls past the deadline: the
    // ranks it holds never arrive.
    throw Error(ErrorCode::kDeadlineExceeded, who + " did not answer: " + e.code().message());
  } catch (const std::exception& e) {
    // A peer that died (refused, reset) or stalls past the deadline: the
    // ranks it holds never arrive.
    throw Error(ErrorCode::kDeadlineExceeded, who + " did not answer: " + e.what());
  }
  std::string body = std::move(res.body());
  try {
    return spmd_part_outputs_from_json(static_cast<int>(res.result_int()), body);
  } catch (const Error& e) {
    throw Error(e.code(), who + ": " + e.message(), e.node());
  }
}

}  // namespace tensord
