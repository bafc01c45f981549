#include "metrics/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace tensord {
namespace {

TEST(Utf8, WellFormedTextIsKept) {
  for (const std::string& s :
       {std::string(), std::string("plain ascii"), std::string("h\xc3\xa9"), std::string("\xe2\x9c\x93 \xef\xbf\xbd"),
        std::string("\xf0\x9d\x84\x9e"), std::string("\xf4\x8f\xbf\xbf"), std::string("nul\0byte", 8)}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(valid_utf8(s), s);
  }
}

TEST(Utf8, EveryBadByteBecomesAQuestionMark) {
  EXPECT_EQ(valid_utf8("a\xff"
                       "b"),
            "a?b");
  EXPECT_EQ(valid_utf8("\x80"), "?");                 // a lone continuation byte
  EXPECT_EQ(valid_utf8("\xc3"), "?");                 // cut short
  EXPECT_EQ(valid_utf8("\xe2\x9c"), "??");            // cut short
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "??");            // overlong '/'
  EXPECT_EQ(valid_utf8("\xe0\x80\xaf"), "???");       // overlong
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "???");       // a UTF-16 surrogate
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), "????");  // above U+10FFFF
  EXPECT_EQ(valid_utf8("\xc3\xa9\xff\xc3\xa9"), "\xc3\xa9?\xc3\xa9");
  EXPECT_FALSE(is_valid_utf8("ok\xfe"));
}

}  // namespace
}  // namespace tensord
