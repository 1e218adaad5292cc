// `troupe chat` as a user runs it, against a `troupe serve` child process: turns stream one after
// another, and a server that closed the connection while the user was typing (idle_timeout_ms)
// costs the user nothing.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/runtime/prefix/replica_process.hpp"

namespace fs = std::filesystem;

namespace {

// `troupe chat --port P` with its stdin and its stdout + stderr on pipes.
class chat_process {
 public:
  explicit chat_process(uint16_t port) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<std::string> args = {TROUPE_BINARY, "chat", "--port", std::to_string(port), "--max-tokens", "4"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1], out_ = out[0];
    if (rc != 0) throw std::runtime_error("cannot start troupe chat");
  }
  ~chat_process() {
    if (in_ >= 0) ::close(in_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }

  void say(const std::string& line) {
    const std::string l = line + "\n";
    BOOST_REQUIRE(::write(in_, l.data(), l.size()) == static_cast<ssize_t>(l.size()));
  }

  // Reads until `needle` has appeared `count` times in all output so far, "error: " appears, the
  // program exits, or 30 s pass; returns everything read so far.
  const std::string& read_until(const std::string& needle, int count) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (occurrences(needle) < count && output_.find("error: ") == std::string::npos &&
           std::chrono::steady_clock::now() < until) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      output_.append(buf, static_cast<size_t>(n));
    }
    return output_;
  }

  // End of input (Ctrl-D): the exit code once it has quit.
  int finish() {
    ::close(in_);
    in_ = -1;
    char buf[4096];
    for (ssize_t n; (n = ::read(out_, buf, sizeof buf)) > 0;) output_.append(buf, static_cast<size_t>(n));
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  const std::string& output() const { return output_; }

 private:
  int occurrences(const std::string& needle) const {
    int n = 0;
    for (size_t at = output_.find(needle); at != std::string::npos; at = output_.find(needle, at + 1)) ++n;
    return n;
  }
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string output_;
};

// A plain TCP connection that sends nothing: true once the server has closed it (within `wait`).
bool closed_while_quiet(uint16_t port, std::chrono::milliseconds wait) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (!closed && std::chrono::steady_clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[512];
      closed = ::recv(fd, buf, sizeof buf, 0) <= 0;  // the idle_timeout event first, then the end
    }
  }
  ::close(fd);
  return closed;
}

}  // namespace

BOOST_AUTO_TEST_CASE(chat_goes_on_after_the_server_closes_its_idle_connection) {
  const fs::path dir = fs::temp_directory_path() / ("troupe_cli_chat_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string make = std::string(TROUPE_BINARY) + " make-checkpoint --preset tiny --out " + dir.string() + " >/dev/null";
  BOOST_REQUIRE(std::system(make.c_str()) == 0);
  troupe::testing::replica_process server({"--model", dir.string(), "--set", "server.idle_timeout_ms=200"});

  chat_process chat(server.port());
  chat.say("Hello");
  BOOST_REQUIRE_MESSAGE(chat.read_until(" tokens]", 1).find(" tokens]") != std::string::npos, chat.output());
  // The user thinks for a while: the server closes quiet connections after 200 ms, as it does
  // a bare one opened now.
  BOOST_TEST(closed_while_quiet(server.port(), std::chrono::seconds(5)));
  chat.say("And then?");
  chat.read_until(" tokens]", 2);
  BOOST_TEST(chat.finish() == 0);
  BOOST_TEST(chat.output().find("error: ") == std::string::npos, chat.output());
  size_t turns = 0;
  for (size_t at = chat.output().find(" tokens]"); at != std::string::npos; at = chat.output().find(" tokens]", at + 1))
    ++turns;
  BOOST_TEST(turns == 2u, chat.output());
  fs::remove_all(dir);
}
