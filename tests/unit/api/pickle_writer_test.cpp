// PickleWriter: the opcodes it writes, and what Python's pickle loads from
// every shape it emits.
#include "api/pickle_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "ops/error.h"
#include "tests/unit/api/python_pickle_loader.h"

namespace tensord {
namespace {

using testing_pickle::have_python;
using testing_pickle::python_load;

std::string body(std::string p) {
  // Without the PROTO header and the STOP, to compare opcodes.
  EXPECT_EQ(p.substr(0, 2), std::string("\x80\x02", 2));
  EXPECT_EQ(p.back(), '.');
  return p.substr(2, p.size() - 3);
}

std::string one_int(int64_t v) {
  PickleWriter w;
  w.int64(v);
  return body(w.finish());
}

TEST(PickleWriter, IntOpcodes) {
  EXPECT_EQ(one_int(0), std::string("K\x00", 2));
  EXPECT_EQ(one_int(255), "K\xff");
  EXPECT_EQ(one_int(256), std::string("M\x00\x01", 3));
  EXPECT_EQ(one_int(65535), "M\xff\xff");
  EXPECT_EQ(one_int(65536), std::string("J\x00\x00\x01\x00", 5));
  EXPECT_EQ(one_int(-1), "J\xff\xff\xff\xff");
  EXPECT_EQ(one_int(int64_t{1} << 31), std::string("\x8a\x05\x00\x00\x00\x80\x00", 7));
  EXPECT_EQ(one_int(-(int64_t{1} << 31) - 1), std::string("\x8a\x05\xff\xff\xff\x7f\xff", 7));
  EXPECT_EQ(one_int(std::numeric_limits<int64_t>::min()), std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10));
  PickleWriter w;
  w.uint64(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(body(w.finish()), std::string("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11));
}

TEST(PickleWriter, ScalarOpcodes) {
  PickleWriter w;
  w.begin_tuple();
  w.boolean(true);
  w.boolean(false);
  w.none();
  w.float64(1.0);
  w.str("ab");
  w.end_tuple();
  EXPECT_EQ(body(w.finish()), std::string("(\x88\x89NG\x3f\xf0\x00\x00\x00\x00\x00\x00X\x02\x00\x00\x00"
                                          "abt",
                                          21));
}

TEST(PickleWriter, InvalidUtf8BecomesReplacementCharacters) {
  PickleWriter w;
  // A lone continuation byte, an overlong '/', a surrogate, a cut-off
  // sequence; the valid two- and four-byte ones stay.
  w.str(
      std::string("a\x80"
                  "b\xc0\xaf"
                  "\xed\xa0\x80"
                  "\xc3\xa9\xf0\x9f\x98\x80\xe2\x82"));
  const std::string b = body(w.finish());
  const std::string want =
      "a\xEF\xBF\xBD"
      "b\xEF\xBF\xBD\xEF\xBF\xBD"
      "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
      "\xc3\xa9\xf0\x9f\x98\x80"
      "\xEF\xBF\xBD\xEF\xBF\xBD";
  ASSERT_EQ(b.size(), 5 + want.size());
  EXPECT_EQ(b.substr(5), want);
  EXPECT_EQ(static_cast<unsigned char>(b[1]), want.size());
}

TEST(PickleWriter, MisuseAsserts) {
  {
    PickleWriter w;
    w.begin_dict();
    EXPECT_THROW(w.begin_list(), Error);  // a list as a key
  }
  {
    PickleWriter w;
    w.begin_dict();
    w.str("k");
    EXPECT_THROW(w.end_dict(), Error);  // a key without its value
  }
  {
    PickleWriter w;
    w.begin_list();
    EXPECT_THROW(w.end_tuple(), Error);
    EXPECT_THROW(w.finish(), Error);  // still open
  }
  {
    PickleWriter w;
    w.none();
    EXPECT_THROW(w.none(), Error);  // two top-level values
  }
  {
    PickleWriter w;
    for (size_t i = 0; i < PickleWriter::kMaxDepth; ++i) w.begin_list();
    EXPECT_THROW(w.begin_list(), Error);
  }
}

TEST(PickleWriter, FinishStartsANewPickle) {
  PickleWriter w;
  w.int64(1);
  const std::string a = w.finish();
  w.int64(1);
  EXPECT_EQ(w.finish(), a);
}

// Every shape the writer emits, loaded by Python.
class PickleWriterPython : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_python()) GTEST_SKIP() << "no " << testing_pickle::kPython << " to load the pickles";
  }
  void expect_loads(const std::string& pickle, const std::string& want_repr) {
    const auto r = python_load(pickle);
    ASSERT_TRUE(r.ok) << r.out;
    EXPECT_EQ(r.out, want_repr);
  }
};

TEST_F(PickleWriterPython, Scalars) {
  PickleWriter w;
  w.begin_list();
  for (int64_t v : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536}, int64_t{-1}, int64_t{-256},
                    int64_t{2147483647}, int64_t{2147483648}, int64_t{-2147483648}, int64_t{-2147483649},
                    int64_t{1} << 40, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    w.int64(v);
  }
  w.uint64(std::numeric_limits<uint64_t>::max());
  w.uint64(uint64_t{1} << 63);
  w.float64(0.5);
  w.float64(-0.0);
  w.float64(1e300);
  w.float64(std::numeric_limits<double>::infinity());
  w.float64(std::nan(""));
  w.boolean(true);
  w.boolean(false);
  w.none();
  w.str("");
  w.str("gloo:all_reduce");
  w.str("caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\" 'q' \\");
  w.str(std::string("nul\x00in", 6));
  w.str("bad\xff");
  w.end_list();
  expect_loads(w.finish(),
               "[0, 255, 256, 65535, 65536, -1, -256, 2147483647, 2147483648, -2147483648, -2147483649, "
               "1099511627776, 9223372036854775807, -9223372036854775808, 18446744073709551615, "
               "9223372036854775808, 0.5, -0.0, 1e+300, inf, nan, True, False, None, '', 'gloo:all_reduce', "
               "'café 😀 \"q\" \\'q\\' \\\\', 'nul\\x00in', 'bad\xEF\xBF\xBD']");
}

TEST_F(PickleWriterPython, Containers) {
  PickleWriter w;
  w.begin_dict();
  w.str("empty_dict");
  w.begin_dict();
  w.end_dict();
  w.str("empty_list");
  w.begin_list();
  w.end_list();
  w.str("empty_tuple");
  w.begin_tuple();
  w.end_tuple();
  w.str("pair");
  w.begin_tuple();
  w.str("world");
  w.str("default_pg");
  w.end_tuple();
  w.int64(7);  // an int key
  w.begin_list();
  w.begin_list();
  w.int64(3);
  w.int64(4);
  w.end_list();
  w.begin_dict();
  w.str("x");
  w.none();
  w.end_dict();
  w.end_list();
  w.end_dict();
  expect_loads(w.finish(),
               "{'empty_dict': {}, 'empty_list': [], 'empty_tuple': (), 'pair': ('world', 'default_pg'), "
               "7: [[3, 4], {'x': None}]}");
}

TEST_F(PickleWriterPython, TopLevelScalarAndDeepNesting) {
  PickleWriter a;
  a.str("only");
  expect_loads(a.finish(), "'only'");
  PickleWriter w;
  std::string want;
  for (size_t i = 0; i < PickleWriter::kMaxDepth; ++i) w.begin_list();
  w.int64(1);
  for (size_t i = 0; i < PickleWriter::kMaxDepth; ++i) w.end_list();
  want = std::string(PickleWriter::kMaxDepth, '[') + "1" + std::string(PickleWriter::kMaxDepth, ']');
  expect_loads(w.finish(), want);
}

TEST_F(PickleWriterPython, LongContainersAreBatched) {
  // More than two batches, and exactly one: the flushes land on item and
  // key/value boundaries.
  for (size_t n : {PickleWriter::kBatch, 2 * PickleWriter::kBatch + 7}) {
    PickleWriter w;
    w.begin_tuple();
    w.begin_list();
    for (size_t i = 0; i < n; ++i) w.int64(static_cast<int64_t>(i));
    w.end_list();
    w.begin_dict();
    for (size_t i = 0; i < n; ++i) {
      w.int64(static_cast<int64_t>(i));
      w.str(std::to_string(i));
    }
    w.end_dict();
    w.end_tuple();
    std::string want_list = "[", want_dict = "{";
    for (size_t i = 0; i < n; ++i) {
      if (i) {
        want_list += ", ";
        want_dict += ", ";
      }
      want_list += std::to_string(i);
      want_dict += std::to_string(i) + ": '" + std::to_string(i) + "'";
    }
    expect_loads(w.finish(), "(" + want_list + "], " + want_dict + "})");
  }
}

}  // namespace
}  // namespace tensord
