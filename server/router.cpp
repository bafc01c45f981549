#include "server/router.h"

#include <algorithm>
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

void Router::add(std::string method, const std::string& route_template, Handler h, Dispatch d) {
  Route r;
  r.handler = std::move(h);
  r.dispatch = d;
  insert(std::move(r), std::move(method), route_template);
}

void Router::add_async(std::string method, const std::string& route_template, AsyncHandler h,
                       size_t inline_body_bytes) {
  Route r;
  r.async = std::move(h);
  r.dispatch = Dispatch::kAsync;
  r.inline_body = inline_body_bytes;
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
}

bool Router::match(const std::vector<Piece>& pieces, size_t piece, const std::string& path, size_t pos,
                   std::map<std::string, std::string>& params) {
  if (piece == pieces.size()) return pos == path.size();
  const Piece& p = pieces[piece];
  if (!p.param) {
    if (path.compare(pos, p.literal.size(), p.literal) != 0) return false;
    return match(pieces, piece + 1, path, pos + p.literal.size(), params);
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
    if (match(pieces, piece + 1, path, end, params)) {
      params[p.literal] = path.substr(pos, end - pos);
      return true;
    }
  }
  return false;
}

Dispatch Router::dispatch_of(const std::string& method, const std::string& path, std::string* route_template,
                             size_t* inline_body_bytes) const {
  for (const auto& r : routes_) {
    std::map<std::string, std::string> params;
    if (r.method == method && match(r.pieces, 0, path, 0, params)) {
      if (route_template) *route_template = r.route_template;
      if (inline_body_bytes) *inline_body_bytes = r.inline_body;
      return r.dispatch;
    }
  }
  return Dispatch::kInline;
}

void Router::dispatch_async(HttpRequest& req, const std::shared_ptr<AsyncReply>& reply) const {
  for (const auto& r : routes_) {
    std::map<std::string, std::string> params;
    if (r.method == req.method && r.dispatch == Dispatch::kAsync && match(r.pieces, 0, req.path, 0, params)) {
      req.route = r.route_template;
      req.params = std::move(params);
      r.async(req, reply);
      return;
    }
  }
  HttpResponse out = dispatch(req);
  reply->finish(false, [out = std::move(out)]() mutable { return std::move(out); });
}

HttpResponse Router::dispatch(HttpRequest& req) const {
  const Route* path_match = nullptr;  // first route matching the path, any method
  const Route* get_match = nullptr;   // HEAD fallback
  std::map<std::string, std::string> get_params;
  std::set<std::string> allow;
  for (const auto& r : routes_) {
    std::map<std::string, std::string> params;
    if (!match(r.pieces, 0, req.path, 0, params)) continue;
    if (r.method == req.method) {
      req.route = r.route_template;
      req.params = std::move(params);
      if (!r.handler)
        throw Error(ErrorCode::kInternal, "asynchronous route " + r.route_template + " called synchronously");
      return r.handler(req);
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
  if (req.method == "HEAD" && get_match != nullptr) {
    req.route = get_match->route_template;
    req.params = std::move(get_params);
    return get_match->handler(req);
  }
  if (path_match == nullptr) {
    throw Error(ErrorCode::kNotFound, "no route for " + printable(req.method, 16) + " " + printable(req.path));
  }
  req.route = path_match->route_template;
  std::string allowed;
  for (const auto& m : allow) allowed += (allowed.empty() ? "" : ", ") + m;
  return method_not_allowed_reply(
      "method " + printable(req.method, 16) + " not allowed on " + path_match->route_template + "; allowed: " + allowed,
      allowed, req.request_id, error_style_for(req.path));
}

}  // namespace tensord
