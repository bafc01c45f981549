// A Beast body that writes an owned string and then views of memory it does
// not own (tensors' bytes), each kept alive by its owner until the message
// goes away: a large response leaves from the tensors themselves, with no
// copy into a body string. Include from server/*.cpp only (server/beast.h).
#pragma once

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

  // Hands the whole body to the serializer as one buffer sequence.
  class writer {
   public:
    using const_buffers_type = std::vector<net::const_buffer>;

    template <bool isRequest, class Fields>
    writer(const http::header<isRequest, Fields>&, const value_type& v) : v_(v) {}

    void init(beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      const_buffers_type bufs;
      bufs.reserve(1 + v_.views.size());
      if (!v_.head.empty()) bufs.emplace_back(v_.head.data(), v_.head.size());
      for (const auto& p : v_.views) {
        if (p.size) bufs.emplace_back(p.data, p.size);
      }
      if (bufs.empty()) return boost::none;
      return std::make_pair(std::move(bufs), false);
    }

   private:
    const value_type& v_;
    bool done_ = false;
  };
};
// NOLINTEND(readability-identifier-naming)

}  // namespace tensord
