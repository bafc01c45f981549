#include "server/request_body.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ops/error.h"
#include "ops/memory_account.h"
#include "server/body_pool.h"

namespace tensord {

RequestBody::RequestBody(Mode mode, size_t len, std::shared_ptr<BodyPool> pool, std::shared_ptr<MemoryAccount> account,
                         std::optional<ContentCoding> coding, size_t max_bytes)
    : mode_(mode), len_(len), pool_(std::move(pool)), account_(std::move(account)) {
  switch (mode_) {
    case Mode::kDirect:
      // The string comes from the body pool: a released body's, its pages
      // already resident, when one fits; else fresh and advised huge pages
      // (one fault per 2 MiB, body_pool.h). Beast would read the body into
      // its own buffer first and copy it from there, 64 KiB at a time.
      direct_ = pool_->take_sized(len);  // every byte is read into before it is used
      break;
    case Mode::kB64:
      // The decoded bytes need 3/4 of the body.
      b64_.emplace(len, pool_->take(len / 4 * 3 + 128));
      break;
    case Mode::kInflate:
      TENSORD_ASSERT(coding.has_value());
      inflate_in_.resize(std::min(len, kInflateReadBytes));
      // The inflated bytes are charged (and checked against the limit)
      // before they are held; the compressed ones pass through inflate_in_.
      inflater_ =
          std::make_unique<StreamInflater>(*coding, max_bytes, len * 4, [this](size_t total) { charge_to(total); });
      break;
  }
}

RequestBody::~RequestBody() {
  drop();
}

char* RequestBody::next() {
  switch (mode_) {
    case Mode::kDirect:
      return direct_.data() + got_;
    case Mode::kB64:
      return b64_->next();
    case Mode::kInflate:
      return inflate_in_.data();
  }
  return nullptr;
}

size_t RequestBody::room() const {
  switch (mode_) {
    case Mode::kDirect:
      return len_ - got_;
    case Mode::kB64:
      return b64_->room();
    case Mode::kInflate:
      return std::min(inflate_in_.size(), len_ - got_);
  }
  return 0;
}

bool RequestBody::done() const {
  return mode_ == Mode::kB64 ? b64_->done() : got_ == len_;
}

size_t RequestBody::left() const {
  return len_ - (mode_ == Mode::kB64 ? b64_->received() : got_);
}

size_t RequestBody::take_first(std::string_view first) {
  first = first.substr(0, std::min(first.size(), len_));
  size_t took = 0;
  // A b64 stream takes its input a window at a time.
  while (took < first.size() && room() > 0) {
    const size_t n = std::min(room(), first.size() - took);
    std::memcpy(next(), first.data() + took, n);
    apply(n);
    took += n;
  }
  return took;
}

void RequestBody::commit(size_t n) {
  last_read_ = n;
  ++reads_;
  apply(n);
}

void RequestBody::apply(size_t n) {
  try {
    switch (mode_) {
      case Mode::kDirect:
        got_ += n;
        charge(got_, done());
        break;
      case Mode::kB64:
        b64_->commit(n);
        got_ += n;
        charge(b64_->out_size(), b64_->done());
        break;
      case Mode::kInflate:
        got_ += n;
        try {
          inflater_->feed(std::string_view(inflate_in_.data(), n));
        } catch (const Error& e) {
          // A bomb (413), a body that is not in its coding (400) or one
          // past the tenant's quota (429).
          if (e.code() != ErrorCode::kQuotaExceeded) throw;
          throw Error(e.code(), e.message() + " (a compressed body counts as it inflates)");
        }
        break;
    }
  } catch (...) {
    drop();
    throw;
  }
}

void RequestBody::charge_to(size_t held) {
  if (!account_ || held == charged_) return;
  if (held < charged_) {
    account_->release(static_cast<int64_t>(charged_ - held));
  } else {
    account_->charge(static_cast<int64_t>(held - charged_));  // throws quota_exceeded: nothing charged
  }
  charged_ = held;
}

void RequestBody::charge(size_t held, bool last) {
  if (!account_ || held <= charged_ || (!last && held - charged_ < kChargeStep)) return;
  try {
    charge_to(held);
  } catch (const Error& e) {
    throw Error(e.code(), e.message() + " (an upload counts as its body arrives)");
  }
}

RequestBody::Finished RequestBody::finish() {
  Finished f;
  f.length = len_;
  switch (mode_) {
    case Mode::kDirect:
      f.body = std::move(direct_);
      direct_ = {};
      break;
    case Mode::kB64:
      f.body = b64_->take_json();
      if (b64_->decoded()) {
        f.decoded.emplace();
        f.decoded->offset = b64_->out_offset();
        f.decoded->size = b64_->out_size();
        f.decoded->bytes = b64_->take_out();
      } else {
        pool_->recycle(b64_->take_out());
      }
      b64_.reset();
      break;
    case Mode::kInflate:
      try {
        f.body = inflater_->finish();
      } catch (...) {
        drop();
        throw;
      }
      inflater_.reset();
      inflate_in_ = {};
      break;
  }
  if (account_ && charged_ > 0) {
    f.charge = std::shared_ptr<void>(
        nullptr, [account = account_, n = static_cast<int64_t>(charged_)](void*) { account->release(n); });
  }
  account_.reset();
  charged_ = 0;
  return f;
}

void RequestBody::drop() {
  if (account_ && charged_ > 0) account_->release(static_cast<int64_t>(charged_));
  account_.reset();
  charged_ = 0;
  // What it held goes back for the next upload.
  if (b64_) {
    pool_->recycle(b64_->take_out());
    pool_->recycle(b64_->take_json());
    b64_.reset();
  }
  if (direct_.capacity() > 0) pool_->recycle(std::move(direct_));
  direct_ = {};
  inflater_.reset();
  inflate_in_ = {};
}

int RequestBody::pace_mark(std::chrono::steady_clock::time_point now, std::chrono::microseconds pace, size_t most) {
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(now - last_read_at_).count();
  last_read_at_ = now;
  const size_t at_pace = last_read_ == 0
                             ? 1
                             : static_cast<size_t>(static_cast<double>(last_read_) * static_cast<double>(pace.count()) /
                                                   static_cast<double>(std::max<int64_t>(took, 1)));
  return static_cast<int>(std::max<size_t>(std::min({most, std::min(room(), left()), at_pace}), 1));
}

}  // namespace tensord
