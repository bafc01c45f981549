#include "server/shm_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "ops/error.h"

namespace tensord {
namespace {

// A POSIX shm object of `size` bytes (0, 1, 2, ...), unlinked at the end.
class ShmObject {
 public:
  explicit ShmObject(size_t size) {
    std::random_device rd;
    key_ = "/unit_shm_" + std::to_string(rd()) + std::to_string(::getpid());
    const int fd = ::shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    std::vector<unsigned char> b(size);
    for (size_t i = 0; i < size; ++i) b[i] = static_cast<unsigned char>(i);
    EXPECT_EQ(::pwrite(fd, b.data(), size, 0), static_cast<ssize_t>(size));
    ::close(fd);
  }
  ~ShmObject() { ::shm_unlink(key_.c_str()); }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;
  const std::string& key() const { return key_; }
  void truncate(size_t n) const {
    const int fd = ::shm_open(key_.c_str(), O_RDWR, 0600);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(n)), 0);
    ::close(fd);
  }

 private:
  std::string key_;
};

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.message().find("/dev/shm"), std::string::npos) << e.message();  // no server path
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(ShmRegistry, KeysAllowed) {
  EXPECT_TRUE(shm_key_allowed("/input_simple"));
  EXPECT_TRUE(shm_key_allowed("/a.b-c_1"));
  for (const char* k : {"", "/", "x", "//x", "/a/b", "/..", "/.", "/nccl-123", "/sem.lock", "/tensord_x", "/a b",
                        "/a\n", "/cuda.shm"}) {
    EXPECT_FALSE(shm_key_allowed(k)) << k;
  }
  EXPECT_FALSE(shm_key_allowed("/" + std::string(201, 'a')));
  EXPECT_TRUE(shm_key_allowed("/" + std::string(200, 'a')));
}

TEST(ShmRegistry, ReadsAndWritesTheSliceOnly) {
  ShmObject o(256);
  ShmRegistry reg;
  reg.add("t", "r", o.key(), 64, 128);
  auto r = reg.find("t", "r");
  ASSERT_TRUE(r);
  unsigned char b[8];
  r->read(0, b, 8);
  EXPECT_EQ(b[0], 64);
  EXPECT_EQ(b[7], 71);
  r->read(120, b, 8);
  EXPECT_EQ(b[7], 191);
  EXPECT_EQ(code_of([&] { r->read(121, b, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { r->read(UINT64_MAX - 2, b, 8); }), ErrorCode::kBadRequest);
  const unsigned char w[4] = {9, 9, 9, 9};
  r->write(4, w, 4);
  r->read(0, b, 8);
  EXPECT_EQ(b[3], 67);
  EXPECT_EQ(b[4], 9);
  EXPECT_EQ(b[7], 9);
  // The object shrinks under the region: refused, never a fault.
  o.truncate(100);
  EXPECT_EQ(code_of([&] { r->read(30, b, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { r->write(40, w, 4); }), ErrorCode::kBadRequest);
  r->write(0, w, 4);  // still inside what is left
}

TEST(ShmRegistry, RegistrationErrors) {
  ShmObject o(64);
  ShmRegistry reg;
  EXPECT_EQ(code_of([&] { reg.add("t", "r", o.key(), 0, 65); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { reg.add("t", "r", o.key(), 60, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { reg.add("t", "r", o.key(), 0, 0); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { reg.add("t", "r", "/definitely_not_there_9f8e", 0, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { reg.add("t", "r", "/../etc/passwd", 0, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(code_of([&] { reg.add("t", "", o.key(), 0, 8); }), ErrorCode::kBadRequest);
  EXPECT_EQ(reg.size(), 0u);
  reg.add("t", "r", o.key(), 0, 64);
  EXPECT_EQ(code_of([&] { reg.add("t", "r", o.key(), 0, 64); }), ErrorCode::kConflict);
  reg.add("t", "r2", o.key(), 0, 8);  // the same tenant may map one object twice
  // Another tenant: neither its name space nor the key it holds.
  EXPECT_EQ(code_of([&] { reg.add("u", "x", o.key(), 0, 8); }), ErrorCode::kBadRequest);
  reg.remove_all("t");
  reg.add("u", "x", o.key(), 0, 8);  // free again once its holder let go
}

TEST(ShmRegistry, TenantsAreApartAndUnregisterCloses) {
  ShmObject a(64), b(64);
  ShmRegistry reg;
  reg.add("t", "r", a.key(), 0, 64);
  reg.add("u", "r", b.key(), 0, 64);
  EXPECT_EQ(reg.status("t", std::nullopt).size(), 1u);
  EXPECT_EQ(reg.status("t", std::nullopt)[0].key, a.key());
  EXPECT_EQ(reg.status("u", std::string("r"))[0].key, b.key());
  EXPECT_EQ(code_of([&] { reg.status("v", std::string("r")); }), ErrorCode::kNotFound);
  auto held = reg.find("t", "r");
  reg.remove("t", "r");
  EXPECT_FALSE(reg.find("t", "r"));
  EXPECT_TRUE(reg.find("u", "r"));
  unsigned char x[4];
  held->read(0, x, 4);  // a request still holding it reads on; closed when it lets go
  EXPECT_EQ(x[3], 3);
  reg.remove("t", "nope");  // unknown: nothing to do
  reg.remove_all("u");
  EXPECT_EQ(reg.size(), 0u);
}

}  // namespace
}  // namespace tensord
