#include "server/router.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "api/error_reply.h"
#include "ops/error.h"

namespace tensord {
namespace {

// User-controlled text echoed in messages: printable ASCII, bounded.
std::string printable(const std::string& s, size_t max = 200) {
  std::string out;
  for (char c : s.substr(0, max)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace

void Router::add(std::string method, const std::string& route_template, Handler h, Access access) {
  Route r;
  r.handler = std::move(h);
  r.access = access;
  insert(std::move(r), std::move(method), route_template);
}

void Router::add_upgrade(std::string method, const std::string& route_template, Handler h, Access access) {
  Route r;
  r.handler = std::move(h);
  r.access = access;
  r.upgrade = true;
  insert(std::move(r), std::move(method), route_template);
}

void Router::add_async(std::string method, const std::string& route_template, AsyncHandler h, size_t inline_body_bytes,
                       BodyKind body_kind, Access access) {
  Route r;
  r.access = access;
  r.async = std::move(h);
  r.inline_body = inline_body_bytes;
  r.body_kind = body_kind;
  insert(std::move(r), std::move(method), route_template);
}

void Router::add_offloaded(std::string method, const std::string& route_template, Handler h, BodyKind body_kind,
                           Access access) {
  // Started on the io thread whatever the body's size (starting only hands
  // the request to the pool); the handler runs where a heavy answer is
  // built: the tenant's lane or the handler pool. What it throws is
  // answered as any handler's error.
  auto handler = std::make_shared<const Handler>(std::move(h));
  Route r;
  r.async = [handler](HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
    reply->finish(true, [handler, req = std::make_shared<HttpRequest>(std::move(req))] { return (*handler)(*req); });
  };
  r.inline_body = std::numeric_limits<size_t>::max();
  r.body_kind = body_kind;
  r.access = access;
  insert(std::move(r), std::move(method), route_template);
}

void Router::insert(Route r, std::string method, const std::string& route_template) {
  if (method.empty() || route_template.empty() || route_template[0] != '/') {
    throw std::invalid_argument("route: bad method or template '" + route_template + "'");
  }
  r.method = std::move(method);
  const std::string& t = route_template;
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] == '{') {
      size_t close = t.find('}', i);
      if (close == std::string::npos) throw std::invalid_argument("route: unclosed '{' in " + t);
      Piece p;
      p.param = true;
      p.literal = t.substr(i + 1, close - i - 1);
      if (p.literal.size() > 3 && p.literal.ends_with("...")) {
        p.greedy = true;
        p.literal.resize(p.literal.size() - 3);
      }
      if (p.literal.empty() || p.literal.find_first_of("{}/.") != std::string::npos) {
        throw std::invalid_argument("route: bad param name in " + t);
      }
      if (!r.pieces.empty() && r.pieces.back().param) {
        throw std::invalid_argument("route: adjacent params in " + t);
      }
      if (p.greedy && r.greedy) throw std::invalid_argument("route: two greedy params in " + t);
      r.greedy = r.greedy || p.greedy;
      r.params++;
      r.pieces.push_back(std::move(p));
      i = close + 1;
    } else {
      size_t next = t.find('{', i);
      if (next == std::string::npos) next = t.size();
      Piece p;
      p.literal = t.substr(i, next - i);
      if (p.literal.find('}') != std::string::npos) {
        throw std::invalid_argument("route: stray '}' in " + t);
      }
      r.literal_chars += p.literal.size();
      r.pieces.push_back(std::move(p));
      i = next;
    }
  }
  // req.route (and the metrics' route label) is the template as API.md
  // writes it: "/v1/tensors/{name}", without the greedy marker.
  std::string shown = t;
  for (size_t k; (k = shown.find("...}")) != std::string::npos;) shown.erase(k, 3);
  for (const auto& other : routes_) {
    if (other.method == r.method && other.raw_template == t) {
      throw std::invalid_argument("route: duplicate " + r.method + " " + t);
    }
  }
  r.raw_template = t;
  r.route_template = std::move(shown);
  r.order = routes_.size();
  routes_.push_back(std::move(r));
  std::stable_sort(routes_.begin(), routes_.end(), [](const Route& a, const Route& b) {
    auto key = [](const Route& x) {
      return std::make_tuple(x.params == 0 ? 0 : 1, -static_cast<long>(x.literal_chars), x.greedy ? 1 : 0, x.order);
    };
    return key(a) < key(b);
  });
  index_routes();
}

std::string_view Router::segment_key(std::string_view s) {
  // Up to the third '/' (exclusive), or all of it.
  size_t slashes = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '/' && ++slashes == 3) return s.substr(0, i);
  }
  return s;
}

void Router::index_routes() {
  by_key_.clear();
  wild_.clear();
  // A route's key, when every path it matches has that key: its leading
  // literal reaches the third '/', or it is all literal.
  auto key_of = [](const Route& r, std::string_view& key) {
    if (r.pieces.empty() || r.pieces[0].param) return false;
    const std::string_view lit = r.pieces[0].literal;
    key = segment_key(lit);
    return key.size() < lit.size() || r.pieces.size() == 1;
  };
  for (const auto& r : routes_) {
    std::string_view key;
    if (key_of(r, key)) by_key_.try_emplace(std::string(key));
  }
  for (const auto& r : routes_) {
    std::string_view key;
    if (key_of(r, key)) {
      by_key_.find(key)->second.push_back(&r);
    } else {
      wild_.push_back(&r);
      for (auto& [k, list] : by_key_) list.push_back(&r);
    }
  }
}

bool Router::match_pieces(const std::vector<Piece>& pieces, size_t piece, const std::string& path, size_t pos,
                          std::map<std::string, std::string>& params) {
  if (piece == pieces.size()) return pos == path.size();
  const Piece& p = pieces[piece];
  if (!p.param) {
    if (path.compare(pos, p.literal.size(), p.literal) != 0) return false;
    return match_pieces(pieces, piece + 1, path, pos + p.literal.size(), params);
  }
  // A param: one or more characters (no '/' unless greedy). It ends the
  // template or is followed by a literal; try the longest candidate first.
  size_t limit = p.greedy ? path.size() : std::min(path.find('/', pos), path.size());
  if (limit <= pos) return false;
  if (piece + 1 == pieces.size()) {
    if (limit != path.size()) return false;
    params[p.literal] = path.substr(pos);
    return true;
  }
  const std::string& next = pieces[piece + 1].literal;
  for (size_t end = limit; end > pos; --end) {
    if (path.compare(end, next.size(), next) != 0) continue;
    if (match_pieces(pieces, piece + 1, path, end, params)) {
      params[p.literal] = path.substr(pos, end - pos);
      return true;
    }
  }
  return false;
}

RouteMatch Router::match(const std::string& method, const std::string& path) const {
  RouteMatch m;
  const Route* path_match = nullptr;  // first route matching the path, any method
  const Route* get_match = nullptr;   // HEAD fallback
  std::map<std::string, std::string> get_params;
  std::set<std::string> allow;
  const auto bucket = by_key_.find(segment_key(path));
  for (const Route* rp : bucket == by_key_.end() ? wild_ : bucket->second) {
    const Route& r = *rp;
    std::map<std::string, std::string> params;
    if (!match_pieces(r.pieces, 0, path, 0, params)) continue;
    if (r.method == method) {
      fill(m, r);
      m.params_ = std::move(params);
      return m;
    }
    if (path_match == nullptr) path_match = &r;
    allow.insert(r.method);
    if (r.method == "GET") {
      allow.insert("HEAD");
      if (get_match == nullptr) {
        get_match = &r;
        get_params = std::move(params);
      }
    }
  }
  if (method == "HEAD" && get_match != nullptr) {
    fill(m, *get_match);
    m.params_ = std::move(get_params);
    return m;
  }
  if (path_match != nullptr) {
    m.route_ = path_match->route_template;
    for (const auto& a : allow) m.allow_ += (m.allow_.empty() ? "" : ", ") + a;
  }
  return m;
}

void Router::fill(RouteMatch& m, const Route& r) const {
  m.route_ = r.route_template;
  m.handler_ = r.handler ? &r.handler : nullptr;
  m.async_ = r.async ? &r.async : nullptr;
  m.auth_ = r.access == Access::kTenant && auth_ ? &auth_ : nullptr;
  m.upgrade_ = r.upgrade;
  m.inline_body_ = r.inline_body;
  m.body_kind_ = r.body_kind;
}

HttpResponse RouteMatch::call(HttpRequest& req) {
  req.route = route_;
  req.params = std::move(params_);
  if (handler_ != nullptr) {
    if (auth_ != nullptr) (*auth_)(req);
    return (*handler_)(req);
  }
  if (async_ != nullptr) throw Error(ErrorCode::kInternal, "asynchronous route " + route_ + " called synchronously");
  if (route_.empty()) {
    throw Error(ErrorCode::kNotFound, "no route for " + printable(req.method, 16) + " " + printable(req.path));
  }
  return method_not_allowed_reply(
      "method " + printable(req.method, 16) + " not allowed on " + route_ + "; allowed: " + allow_, allow_,
      req.request_id, error_style_for(req.path));
}

void RouteMatch::call_async(HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) {
  if (async_ == nullptr) {
    // Not an asynchronous route (a bug in the caller): answered at once.
    HttpResponse out = call(req);
    reply->finish(false, [out = std::move(out)]() mutable { return std::move(out); });
    return;
  }
  req.route = route_;
  req.params = std::move(params_);
  if (auth_ != nullptr) (*auth_)(req);
  (*async_)(req, reply);
}

}  // namespace tensord
