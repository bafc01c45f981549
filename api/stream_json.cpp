#include "api/stream_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>

#include "api/json_writer.h"
#include "metrics/utf8.h"
#include "ops/error.h"

namespace tensord {
namespace {

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadRequest, message);
}

}  // namespace

StreamSubscription stream_subscription_from_json(std::string_view text, int default_ms, int min_ms, int max_ms) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError()) bad(std::string("malformed JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()));
  if (!doc.IsObject()) bad("expected an object {\"subscribe\": [...], \"interval_ms\": N}");
  StreamSubscription s;
  s.interval_ms = default_ms;
  bool have_subscribe = false;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    std::string k(it->name.GetString(), it->name.GetStringLength());
    const auto& v = it->value;
    if (k == "subscribe") {
      have_subscribe = true;
      if (!v.IsArray() || v.Empty()) bad("subscribe must be a non-empty array of stream names");
      for (const auto& n : v.GetArray()) {
        if (!n.IsString()) bad("subscribe must be a non-empty array of stream names");
        std::string name(n.GetString(), n.GetStringLength());
        if (name == "metrics") {
          s.metrics = true;
        } else if (name == "jobs") {
          s.jobs = true;
        } else {
          bad("unknown stream '" + name + "' (streams: metrics, jobs)");
        }
      }
    } else if (k == "interval_ms") {
      if (!v.IsNumber()) bad("interval_ms must be a number");
      double d = v.GetDouble();
      if (!(d == d)) bad("interval_ms must be a number");
      s.interval_ms = static_cast<int>(std::clamp(d, static_cast<double>(min_ms), static_cast<double>(max_ms)));
    } else {
      bad("unknown field '" + k + "'");
    }
  }
  if (!have_subscribe) bad("missing 'subscribe'");
  return s;
}

std::string stream_subscribed_to_json(const StreamSubscription& s) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("type");
  w.String("subscribed");
  w.Key("streams");
  w.StartArray();
  if (s.metrics) w.String("metrics");
  if (s.jobs) w.String("jobs");
  w.EndArray();
  w.Key("interval_ms");
  w.Int(s.interval_ms);
  w.EndObject();
  return json_text(sb);
}

std::string stream_error_to_json(const std::string& message) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("type");
  w.String("error");
  w.Key("error");
  w.StartObject();
  w.Key("code");
  write_string(w, error_code_name(ErrorCode::kBadRequest));
  w.Key("message");
  write_string(w, valid_utf8(message));
  w.EndObject();
  w.EndObject();
  return json_text(sb);
}

std::string job_event_to_json(const JobStateEvent& e) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("type");
  w.String("job");
  w.Key("id");
  write_string(w, e.id);
  w.Key("state");
  write_string(w, e.state);
  w.Key("tenant");
  write_string(w, e.tenant);
  w.Key("partition");
  write_string(w, e.partition);
  w.Key("queue_ms");
  w.Double(e.queue_ms);
  w.Key("run_ms");
  w.Double(e.run_ms);
  w.EndObject();
  return json_text(sb);
}

std::string metrics_snapshot_to_json(const MetricsSnapshot& s) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("type");
  w.String("metrics");
  w.Key("time");
  w.Double(s.time);
  w.Key("uptime_s");
  w.Double(s.uptime_s);
  if (s.requests) {
    w.Key("requests");
    w.StartObject();
    for (const auto& [code, n] : *s.requests) {
      write_key(w, code);
      w.Int64(n);
    }
    w.EndObject();
  }
  w.Key("partitions");
  w.StartArray();
  for (const auto& p : s.partitions) {
    w.StartObject();
    w.Key("name");
    write_string(w, p.name);
    w.Key("inflight");
    w.Int(p.inflight);
    w.Key("limit");
    w.Int(p.limit);
    w.Key("queued");
    w.Int64(p.queued);
    w.Key("busy_seconds");
    w.Double(p.busy_seconds);
    w.EndObject();
  }
  w.EndArray();
  w.Key("tenants");
  w.StartArray();
  for (const auto& t : s.tenants) {
    w.StartObject();
    w.Key("name");
    write_string(w, t.name);
    w.Key("partition");
    write_string(w, t.partition);
    w.Key("queued");
    w.Int64(t.queued);
    w.Key("running");
    w.Int(t.running);
    w.Key("busy_seconds");
    w.Double(t.busy_seconds);
    if (t.memory_bytes) {
      w.Key("memory_bytes");
      w.Int64(*t.memory_bytes);
    }
    if (t.memory_limit_bytes) {
      w.Key("memory_limit_bytes");
      w.Int64(*t.memory_limit_bytes);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("jobs");
  w.StartObject();
  w.Key("queued");
  w.Int64(s.jobs_queued);
  w.Key("running");
  w.Int64(s.jobs_running);
  w.Key("succeeded");
  w.Int64(s.jobs_succeeded);
  w.Key("failed");
  w.Int64(s.jobs_failed);
  w.Key("cancelled");
  w.Int64(s.jobs_cancelled);
  w.EndObject();
  w.EndObject();
  return json_text(sb);
}

}  // namespace tensord
