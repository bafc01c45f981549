// A reference compressor for the server's inflation tests (zlib's own
// deflate, gzip or zlib framing), so the inflater is checked against bytes
// it did not write.
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "server/content_coding.h"

namespace tensord {

inline std::string compressed(const std::string& s, ContentCoding c, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, c == ContentCoding::kGzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, s.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
  z.avail_in = static_cast<uInt>(s.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace tensord
