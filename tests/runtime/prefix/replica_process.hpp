// A `troupe serve` child process for end-to-end tests: started with the given flags on free
// loopback ports, its ports read from the banner, stopped with SIGTERM (or crashed with SIGKILL).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace troupe::testing {

class replica_process {
 public:
  explicit replica_process(std::vector<std::string> flags) {
    std::vector<std::string> args = {TROUPE_BINARY, "serve", "--port", "0", "--metrics-port", "0", "--http-port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    out_ = fds[0];
    if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
    // Read the banner until "ready" (or the process dies, or 60 s pass).
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (banner_.find("troupe serve: ready") == std::string::npos) {
      if (std::chrono::steady_clock::now() > until) throw std::runtime_error("no banner: " + banner_);
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) throw std::runtime_error("troupe serve exited: " + banner_);
      banner_.append(buf, static_cast<size_t>(n));
    }
    port_ = number_after("listening on 127.0.0.1:");
    metrics_port_ = number_after("metrics on http://127.0.0.1:");
    http_port_ = number_after("OpenAI-compatible API on http://127.0.0.1:");
  }
  ~replica_process() { stop(); }

  // SIGTERM: the server drains and exits; SIGKILL (crash()): a replica that dies with no drain
  // and no goodbye to its clients.
  void stop(int signal = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    ::close(out_);
  }
  void crash() { stop(SIGKILL); }
  uint16_t port() const { return port_; }
  uint16_t metrics_port() const { return metrics_port_; }
  uint16_t http_port() const { return http_port_; }
  const std::string& banner() const { return banner_; }

 private:
  uint16_t number_after(const std::string& prefix) const {
    auto at = banner_.find(prefix);
    if (at == std::string::npos) return 0;
    return static_cast<uint16_t>(std::stoi(banner_.substr(at + prefix.size())));
  }
  pid_t pid_ = -1;
  int out_ = -1;
  std::string banner_;
  uint16_t port_ = 0, metrics_port_ = 0, http_port_ = 0;
};

}  // namespace troupe::testing
