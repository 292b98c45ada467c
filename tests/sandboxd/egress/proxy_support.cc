#include "proxy_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <openssl/ssl.h>

namespace sandboxd {
namespace egress {
namespace egress_test {

void FakeResolver::Set(const std::string& host, std::vector<std::vector<IpAddress>> answers) {
  codemode::MutexLock lock(&mu_);
  answers_[host] = std::move(answers);
}

void FakeResolver::Resolve(const std::string& host, Callback done) {
  absl::StatusOr<std::vector<IpAddress>> answer = absl::NotFoundError("no such name");
  {
    codemode::MutexLock lock(&mu_);
    const int call = calls_[host]++;
    auto it = answers_.find(host);
    if (it != answers_.end() && !it->second.empty()) {
      answer = it->second[std::min<size_t>(call, it->second.size() - 1)];
    }
  }
  // Answers from another thread, as getaddrinfo's would.
  codemode::MutexLock lock(&mu_);
  answering_.emplace_back([done = std::move(done), answer]() { done(answer); });
}

void FakeResolver::JoinAnswers() {
  for (;;) {
    std::vector<std::thread> threads;
    {
      codemode::MutexLock lock(&mu_);
      threads.swap(answering_);
    }
    if (threads.empty()) return;
    for (std::thread& t : threads) t.join();
  }
}

int FakeResolver::calls(const std::string& host) {
  codemode::MutexLock lock(&mu_);
  return calls_[host];
}

void RecordingSink::Record(const Decision& d) {
  codemode::MutexLock lock(&mu_);
  decisions_.push_back(d);
}

std::vector<Decision> RecordingSink::WaitFor(size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      codemode::MutexLock lock(&mu_);
      if (decisions_.size() >= n) return decisions_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  codemode::MutexLock lock(&mu_);
  return decisions_;
}

EchoServer::EchoServer() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(listen_fd_, 128);
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++accepted_;
      codemode::MutexLock lock(&mu_);
      servers_.emplace_back([this, fd] { Serve(fd); });
    }
  });
}

void EchoServer::Serve(int fd) {
  char buf[4096];
  while (!stop_) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    {
      codemode::MutexLock lock(&mu_);
      received_.append(buf, n);
    }
    if (write(fd, buf, n) != n) break;
  }
  close(fd);
}

EchoServer::~EchoServer() {
  stop_ = true;
  acceptor_.join();
  std::vector<std::thread> servers;
  {
    codemode::MutexLock lock(&mu_);
    servers.swap(servers_);
  }
  for (auto& t : servers) t.join();
  close(listen_fd_);
}

std::string EchoServer::received() {
  codemode::MutexLock lock(&mu_);
  return received_;
}

Client Client::Tcp(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return Client(-1);
  }
  return Client(fd);
}

Client Client::Unix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return Client(-1);
  }
  return Client(fd);
}

Client::~Client() { Close(); }

void Client::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool Client::Send(const std::string& bytes) {
  return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

bool Client::SendOutOfBand(char byte) { return send(fd_, &byte, 1, MSG_OOB | MSG_NOSIGNAL) == 1; }

std::string Client::Read(const std::string& until, std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (until.empty() || out.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

bool Client::ClosedWithin(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    if (recv(fd_, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

UnixListener::UnixListener(const std::string& path) {
  unlink(path.c_str());
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd_, 64) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

UnixListener::~UnixListener() {
  if (fd_ >= 0) close(fd_);
}

Client UnixListener::Accept(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  if (fd_ < 0 || poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return Client::Adopt(-1);
  return Client::Adopt(accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
}

std::string ClientHelloFor(const std::string& server_name) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (!server_name.empty()) SSL_set_tlsext_host_name(ssl, server_name.c_str());
  SSL_connect(ssl);  // wants to read the server's answer: the ClientHello is in `out`
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string hello(data, n);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

IoThreads::IoThreads() : work_(io_.get_executor()) {
  for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
}

IoThreads::~IoThreads() {
  work_.reset();
  io_.stop();
  for (auto& t : threads_) t.join();
}

}  // namespace egress_test
}  // namespace egress
}  // namespace sandboxd
