// A large request body as HttpSession reads it with the socket's own reads
// (http_session_body.cpp): where each read goes, what is done with what it
// brought, the tenant's charge for it, and how fast it comes. Three ways:
//  - kDirect: straight into its final string (from the body pool);
//  - kB64: a JSON body whose "b64" value is decoded as it arrives
//    (api/json_b64_stream.h), the decoded bytes from the body pool;
//  - kInflate: a gzip or deflate body inflated as it arrives
//    (stream_inflater.h), the compressed bytes never held whole.
// The session owns the socket, the timers and the answer; this holds the
// body's state between reads. What a read brings may end the request:
// commit() throws the Error to answer (a quota passed, a bomb, bytes not in
// their coding), with the body's buffers and charge released. One body per
// object, on the session's strand.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "api/json_b64_stream.h"
#include "server/content_coding.h"
#include "server/stream_inflater.h"

namespace tensord {

class BodyPool;
class MemoryAccount;

class RequestBody {
 public:
  enum class Mode { kDirect, kB64, kInflate };

  // `len`: its Content-Length; `account`: whom the body is charged to as
  // it arrives (null: nobody). kInflate: `coding` (required) and
  // `max_bytes`, the limit on the inflated body.
  RequestBody(Mode mode, size_t len, std::shared_ptr<BodyPool> pool, std::shared_ptr<MemoryAccount> account,
              std::optional<ContentCoding> coding = std::nullopt, size_t max_bytes = 0);
  ~RequestBody();  // releases what it still holds (drop())
  RequestBody(const RequestBody&) = delete;
  RequestBody& operator=(const RequestBody&) = delete;

  // Where the next read goes, and how much it may bring.
  char* next();
  size_t room() const;
  // `n` bytes came (into next(), or the body's first bytes read with the
  // header, copied in by take_first): decodes, inflates and charges them.
  // Throws the Error to answer; the body is dropped first.
  void commit(size_t n);
  // Copies the body's first bytes (read with the header) in and commits
  // them; returns how many of `first` it took.
  size_t take_first(std::string_view first);
  bool done() const;
  Mode mode() const { return mode_; }
  // Bytes of the wire body still to come.
  size_t left() const;

  // What the finished body is for handle_request.
  struct Finished {
    std::string body;                   // the message body the route sees (inflated when kInflate)
    std::optional<DecodedB64> decoded;  // kB64: the decoded "b64" value, when there was one
    size_t length = 0;                  // the body's length on the wire
    std::shared_ptr<void> charge;       // releases the body's charge when the last holder lets go
  };
  // Once done(): hands the body over. Throws (kInflate: a truncated
  // stream) the Error to answer, the body dropped.
  Finished finish();
  // Stops: buffers back to the pool, the charge released. Idempotent.
  void drop();

  // The socket's low-water mark for the next read (SO_RCVLOWAT,
  // http_session_body.cpp set_low_water): what the client sent in the
  // last `pace` at the pace of the last read, at most `most` and left();
  // at least 1 (the body's first read: 1).
  int pace_mark(std::chrono::steady_clock::time_point now, std::chrono::microseconds pace, size_t most);
  // How many reads have completed (the session's stall watch).
  uint64_t reads() const { return reads_; }

 private:
  // Charges or releases the account to hold exactly `held` bytes; throws
  // (quota_exceeded) with nothing charged when that passes the quota.
  void charge_to(size_t held);
  // Charges up to `held` in steps of kChargeStep, all of it when `last`.
  void charge(size_t held, bool last);
  // Applies n bytes (decode, inflate, charge) without counting a read.
  void apply(size_t n);

  static constexpr size_t kChargeStep = size_t{1} << 20;
  // 64 KiB a read: one piece of a bomb inflates to at most ~64 MiB (zlib's
  // ratio is ~1032:1) before the limit stops it, a bounded stall for the
  // thread reading it.
  static constexpr size_t kInflateReadBytes = size_t{64} << 10;

  const Mode mode_;
  const size_t len_;
  std::shared_ptr<BodyPool> pool_;
  std::shared_ptr<MemoryAccount> account_;
  size_t charged_ = 0;
  size_t got_ = 0;      // wire bytes committed
  std::string direct_;  // kDirect: the body
  std::optional<JsonB64Stream> b64_;
  std::unique_ptr<StreamInflater> inflater_;
  std::string inflate_in_;  // kInflate: the compressed body's read buffer
  size_t last_read_ = 0;    // what the last read brought, and when the one before it was asked for
  std::chrono::steady_clock::time_point last_read_at_{};
  uint64_t reads_ = 0;
};

}  // namespace tensord
