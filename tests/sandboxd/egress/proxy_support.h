// What the egress proxy tests use: a fake resolver, a recording sink, a local origin
// server that logs what reaches it, a blocking client, and real TLS ClientHellos (OpenSSL).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "base/mutex.h"
#include "egress/proxy_seams.h"

namespace sandboxd {
namespace egress {
namespace egress_test {

// Fixed answers per name; a name without one fails to resolve. Each answer may be a list
// of answers, given in turn (the last repeats), to play a DNS that changes its mind.
class FakeResolver : public Resolver {
 public:
  ~FakeResolver() override { JoinAnswers(); }
  void Set(const std::string& host, std::vector<std::vector<IpAddress>> answers);
  void Resolve(const std::string& host, Callback done) override;
  int calls(const std::string& host);
  // Waits for every answer given so far to be delivered: the callbacks post to the proxy's
  // io_context, which must outlive them.
  void JoinAnswers();

 private:
  codemode::Mutex mu_;
  std::map<std::string, std::vector<std::vector<IpAddress>>> answers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> answering_ ABSL_GUARDED_BY(mu_);
};

class RecordingSink : public DecisionSink {
 public:
  void Record(const Decision& d) override;
  // Waits up to 5 s for `n` decisions; returns what there is.
  std::vector<Decision> WaitFor(size_t n);

 private:
  codemode::Mutex mu_;
  std::vector<Decision> decisions_ ABSL_GUARDED_BY(mu_);
};

// A TCP server on 127.0.0.1 that echoes what it reads and logs it.
class EchoServer {
 public:
  EchoServer();
  ~EchoServer();
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  std::string received();

 private:
  void Serve(int fd);
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  codemode::Mutex mu_;
  std::string received_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> servers_ ABSL_GUARDED_BY(mu_);
};

// A blocking client socket with a receive timeout.
class Client {
 public:
  static Client Tcp(uint16_t port);
  static Client Unix(const std::string& path);
  static Client Adopt(int fd) { return Client(fd); }
  Client(Client&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ~Client();
  bool Send(const std::string& bytes);
  bool SendOutOfBand(char byte);  // MSG_OOB: TCP's urgent byte, a unix stream's out-of-band one
  // Reads until `until` is in what was read, the peer closes, or `timeout` passes.
  std::string Read(const std::string& until = "", std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Whether the peer closed (reads EOF or a reset) within `timeout`.
  bool ClosedWithin(std::chrono::milliseconds timeout);
  bool connected() const { return fd_ >= 0; }
  void Close();

 private:
  explicit Client(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// A unix socket listener: the relay's side when the host dials in.
class UnixListener {
 public:
  explicit UnixListener(const std::string& path);
  ~UnixListener();
  // The next connection, or one that is not connected() after `timeout`.
  Client Accept(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
};

// The first flight of a real TLS client (OpenSSL) asking for `server_name` (none if empty).
std::string ClientHelloFor(const std::string& server_name);

// An io_context run by two threads until destroyed.
class IoThreads {
 public:
  IoThreads();
  ~IoThreads();
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

}  // namespace egress_test
}  // namespace egress
}  // namespace sandboxd
