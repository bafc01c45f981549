// The wire's floor for bench/datapath.py: a sender and a receiver thread
// move N bytes over one 127.0.0.1 TCP connection, the sender from a buffer
// in memory, the receiver into a preallocated buffer of N bytes (what a
// server that reads a body straight into its tensor memory would do).
// One connection per repetition (connect + transfer + the receiver's last
// byte), median of --reps. Depends on nothing but the C++ library and POSIX,
// so bench/datapath.py can build it with g++ alone when build/ lacks it.
//
//   socket_pair [--bytes N] [--reps R] [--chunk C]
//   -> {"bytes": N, "reps": R, "median_s": ..., "min_s": ..., "gbps": ...}
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "socket_pair: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void send_all(int fd, const char* p, size_t n, size_t chunk) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, std::min(n, chunk), MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("send");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void recv_all(int fd, char* p, size_t n, size_t chunk) {
  while (n > 0) {
    ssize_t k = ::recv(fd, p, std::min(n, chunk), 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("recv");
    }
    if (k == 0) die("recv: early end of stream");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{256} << 20;
  int reps = 5;
  size_t chunk = size_t{1} << 30;  // one call per buffer: the kernel splits it
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--bytes") {
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (a == "--chunk") {
      chunk = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: socket_pair [--bytes N] [--reps R] [--chunk C]\n");
      return 2;
    }
  }
  if (reps < 1 || chunk == 0) {
    std::fprintf(stderr, "socket_pair: --reps and --chunk must be positive\n");
    return 2;
  }

  // Both buffers touched once up front: the floor excludes page faults.
  std::vector<char> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 2654435761u >> 13);
  std::memset(dst.data(), 0, bytes);

  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) die("socket");
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("bind");
  if (::listen(lfd, 4) < 0) die("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) < 0) die("getsockname");

  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::thread receiver([&] {
      int fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) die("accept");
      recv_all(fd, dst.data(), bytes, chunk);
      ::close(fd);
    });
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("connect");
    send_all(fd, src.data(), bytes, chunk);
    receiver.join();
    auto t1 = std::chrono::steady_clock::now();
    ::close(fd);
    if (std::memcmp(src.data(), dst.data(), bytes) != 0) {
      std::fprintf(stderr, "socket_pair: received bytes differ\n");
      return 1;
    }
    std::memset(dst.data(), 0, std::min<size_t>(bytes, 4096));
    secs.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  ::close(lfd);
  std::vector<double> sorted = secs;
  std::sort(sorted.begin(), sorted.end());
  double med = sorted[sorted.size() / 2];
  if (sorted.size() % 2 == 0) med = 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  std::printf("{\"bytes\": %zu, \"reps\": %d, \"median_s\": %.6f, \"min_s\": %.6f, \"gbps\": %.3f}\n", bytes, reps, med,
              sorted.front(), med > 0 ? static_cast<double>(bytes) / med / 1e9 : 0.0);
  return 0;
}
