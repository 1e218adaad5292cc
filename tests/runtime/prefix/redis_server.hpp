// A private redis-server for one test: started on a Unix socket (or a loopback TCP port) in its
// own temporary directory, with no persistence; killed, paused and restarted on demand. Also a
// raw hiredis client for what the store under test does not do (corrupting entries, TTL, ACL).
#pragma once

#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace troupe::testing {

struct redis_reply_deleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using redis_reply = std::unique_ptr<redisReply, redis_reply_deleter>;

class redis_server {
 public:
  // tcp: listen on a free loopback port instead of a Unix socket.
  explicit redis_server(std::vector<std::string> extra_args = {}, bool tcp = false)
      : extra_(std::move(extra_args)), tcp_(tcp) {
    char tmpl[] = "/tmp/troupe-redis-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (tcp_) port_ = free_port();
    start();
  }
  ~redis_server() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string socket() const { return dir_ + "/redis.sock"; }
  int port() const { return port_; }
  std::string url(const std::string& creds = "", int db = 0) const {
    if (tcp_) return "redis://" + creds + "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
    return "unix://" + creds + socket() + (db ? "?db=" + std::to_string(db) : "");
  }
  pid_t pid() const { return pid_; }

  void start() {
    std::vector<std::string> args = {"redis-server", "--port", tcp_ ? std::to_string(port_) : "0",
                                     "--save", "", "--appendonly", "no", "--dir", dir_,
                                     "--logfile", dir_ + "/redis.log"};
    if (tcp_) {
      args.insert(args.end(), {"--bind", "127.0.0.1"});
    } else {
      args.insert(args.end(), {"--unixsocket", socket(), "--unixsocketperm", "700"});
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start redis-server");
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (connectable()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not come up; see " + dir_ + "/redis.log");
  }
  void stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);  // a paused server cannot act on SIGTERM
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    std::error_code ec;
    std::filesystem::remove(socket(), ec);
  }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

  redisContext* connect() const {
    timeval tv{2, 0};
    return tcp_ ? redisConnectWithTimeout("127.0.0.1", port_, tv) : redisConnectUnixWithTimeout(socket().c_str(), tv);
  }
  // One command on a fresh connection (after AUTH when a password is given).
  redis_reply command(const std::vector<std::string>& args, const std::string& password = "") const {
    std::unique_ptr<redisContext, void (*)(redisContext*)> c(connect(), redisFree);
    if (!c || c->err) throw std::runtime_error("cannot connect to the test redis-server");
    if (!password.empty()) redis_reply(static_cast<redisReply*>(redisCommand(c.get(), "AUTH %s", password.c_str())));
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return redis_reply(static_cast<redisReply*>(redisCommandArgv(c.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
  }

 private:
  bool connectable() const {
    std::unique_ptr<redisContext, void (*)(redisContext*)> c(connect(), redisFree);
    if (!c || c->err) return false;
    redis_reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
    // A server with a password answers NOAUTH: it is up all the same.
    return r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR);
  }
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    return ntohs(a.sin_port);
  }

  std::vector<std::string> extra_;
  bool tcp_;
  int port_ = 0;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace troupe::testing
