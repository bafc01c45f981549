// A Beast body that writes an owned string and then views of memory it does
// not own (tensors' bytes), each kept alive by its owner until the message
// goes away: a large response leaves from the tensors themselves, with no
// copy into a body string. Include from server/*.cpp only (server/beast.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/optional.hpp>

#include "api/http_types.h"
#include "server/beast.h"

namespace tensord {

// Beast's Body concept names value_type and writer.
// NOLINTBEGIN(readability-identifier-naming)
struct PartsBody {
  struct value_type {
    std::string head;
    std::vector<BodyView> views;
  };

  static std::uint64_t size(const value_type& v) {
    std::uint64_t n = v.head.size();
    for (const auto& p : v.views) n += p.size;
    return n;
  }

  // Hands the body to the serializer as buffer sequences: the head and
  // every plain view at once; a view made as it is sent (BodyView::fill),
  // a scratch buffer of it at a time (Beast asks for the next sequence once
  // the last is written).
  class writer {
   public:
    using const_buffers_type = std::vector<net::const_buffer>;
    static constexpr size_t kScratchBytes = size_t{512} << 10;  // a multiple of BodyView::kFillAlign
    static_assert(kScratchBytes % BodyView::kFillAlign == 0);

    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& v) : v_(v) {}

    void init(beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      const_buffers_type bufs;
      if (!head_sent_) {
        head_sent_ = true;
        if (!v_.head.empty()) bufs.emplace_back(v_.head.data(), v_.head.size());
      }
      while (next_ < v_.views.size()) {
        const BodyView& p = v_.views[next_];
        if (!p.fill || p.size == 0) {
          if (p.size) bufs.emplace_back(p.data, p.size);
          ++next_;
          continue;
        }
        if (!bufs.empty()) break;  // what came before it goes first
        const size_t n = std::min(kScratchBytes, p.size - at_);
        if (scratch_.empty()) scratch_.resize(kScratchBytes);
        p.fill(at_, scratch_.data(), n);
        bufs.emplace_back(scratch_.data(), n);
        at_ += n;
        if (at_ == p.size) {
          ++next_;
          at_ = 0;
        }
        break;
      }
      if (bufs.empty()) return boost::none;
      return std::make_pair(std::move(bufs), next_ < v_.views.size());
    }

   private:
    const value_type& v_;
    bool head_sent_ = false;
    size_t next_ = 0;  // the view to send next
    size_t at_ = 0;    // how much of it, when it is filled
    std::string scratch_;
  };
};
// NOLINTEND(readability-identifier-naming)

}  // namespace tensord
