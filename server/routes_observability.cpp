// GET /v1/trace (Chrome trace-event JSON) and the plain-HTTP face of
// GET /v1/stream (the WebSocket itself is websocket_session.cpp).
#include <cstdlib>
#include <string>

#include "api/error_reply.h"
#include "api/flight_recorder_json.h"
#include "api/flight_recorder_pickle.h"
#include "metrics/trace_buffer.h"
#include "ops/dist/flight_recorder.h"
#include "ops/error.h"
#include "scheduler/engine.h"
#include "scheduler/rank_workers.h"
#include "scheduler/tenant_registry.h"
#include "server/app.h"
#include "server/auth.h"
#include "server/flight_recorder_files.h"

namespace tensord {
namespace {

// ?last=N: a non-negative integer; absent: the whole ring.
size_t parse_last(const HttpRequest& req, size_t cap) {
  auto it = req.query.find("last");
  if (it == req.query.end()) return cap;
  const std::string& v = it->second;
  bool digits = !v.empty() && v.size() <= 19;
  for (char c : v) digits = digits && c >= '0' && c <= '9';
  if (!digits) throw Error(ErrorCode::kBadRequest, "last must be a non-negative integer, got '" + v + "'");
  unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
  return n < cap ? static_cast<size_t>(n) : cap;
}

// ?format=json (the default) or pickle: true for pickle.
bool parse_format(const HttpRequest& req) {
  auto it = req.query.find("format");
  if (it == req.query.end() || it->second == "json") return false;
  if (it->second == "pickle") return true;
  std::string v = it->second.substr(0, 64);
  for (char& c : v) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  throw Error(ErrorCode::kBadRequest, "format must be json or pickle, got '" + v + "'");
}

}  // namespace

void add_observability_routes(Router& r, AppContext& app) {
  r.add("GET", "/v1/trace", [&app](HttpRequest& req) {
    const Tenant& t = request_tenant(req);
    TraceBuffer& tb = TraceBuffer::global();
    size_t last = parse_last(req, tb.capacity());
    bool see_all = t.admin() || app.tenants->anonymous();
    return json_response(200, tb.render_json(last, t.name, see_all));
  });
  // API.md 8: every local rank's ring, or ?rank=R's alone, in PyTorch's
  // FlightRecorder dump layout. Shapes and dtypes only, no tensor data:
  // any authenticated tenant may read it. ?format=pickle (with a rank) is
  // that rank's pickle file, the form fr_trace loads from a folder.
  r.add("GET", "/v1/flight-recorder", [&app](HttpRequest& req) {
    RankWorkers& ranks = app.engine->ranks();
    const bool pickle = parse_format(req);
    auto it = req.query.find("rank");
    if (it == req.query.end() && pickle) {
      throw Error(ErrorCode::kBadRequest, "format=pickle needs rank=R: the pickle is one rank's file");
    }
    if (it != req.query.end()) {
      const std::string& v = it->second;
      bool digits = !v.empty() && v.size() <= 9;
      for (char c : v) digits = digits && c >= '0' && c <= '9';
      if (!digits) throw Error(ErrorCode::kBadRequest, "rank must be a non-negative integer, got '" + v + "'");
      const int r = std::atoi(v.c_str());
      if (!ranks.is_local(r)) {
        throw Error(ErrorCode::kNotFound, "rank " + v + " is not local to this server (its ranks are " +
                                              std::to_string(ranks.offset()) + ".." +
                                              std::to_string(ranks.offset() + ranks.size() - 1) + ")");
      }
      const dist::FlightRecorderDump dump = ranks.recorder(r - ranks.offset())->dump();
      if (!pickle) return json_response(200, dist::flight_recorder_json(dump));
      HttpResponse resp;
      resp.content_type = "application/octet-stream";
      resp.body = dist::flight_recorder_pickle(dump);
      // The name fr_trace wants for the file (<prefix><rank>).
      resp.headers.emplace_back("Content-Disposition", std::string("attachment; filename=\"") + kFlightRecorderPrefix +
                                                           std::to_string(r) + "\"");
      return resp;
    }
    std::vector<dist::FlightRecorderDump> dumps;
    dumps.reserve(static_cast<size_t>(ranks.size()));
    for (int r = 0; r < ranks.size(); ++r) dumps.push_back(ranks.recorder(r)->dump());
    return json_response(200, dist::flight_recorder_ranks_json(dumps));
  });
  // The WebSocket (API.md 9): the session upgrades a request with an
  // Upgrade: websocket header; this answers one without it.
  r.add_upgrade("GET", "/v1/stream", [](HttpRequest& req) {
    return upgrade_required_reply("GET /v1/stream is a WebSocket: send Upgrade: websocket", "websocket",
                                  req.request_id);
  });
}

}  // namespace tensord
