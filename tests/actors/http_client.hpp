// A minimal HTTP/1.1 client for the OpenAI-compatible API's end-to-end tests: one keep-alive
// connection, whole responses read back (Content-Length or chunked bodies) with a timeout.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "examples/cpp/troupe_client.hpp"

namespace troupe::e2e {

struct http_reply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked
  bool closed = false;  // the server closed the connection after it
};

// The JSON of each server-sent event in a response body ("[DONE]" as that string).
inline std::vector<nlohmann::json> sse_events(const std::string& body) {
  std::vector<nlohmann::json> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    auto end = body.find("\n\n", at);
    auto data = body.substr(at + 6, end - at - 6);
    out.push_back(data == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(data));
    at = end + 2;
  }
  return out;
}

// The ids a completion's logprobs name: a model without a tokenizer writes each token as
// "token_id:N" (vLLM's return_tokens_as_token_ids form).
inline std::vector<int32_t> logprob_ids(const nlohmann::json& logprobs) {
  std::vector<int32_t> out;
  for (const auto& t : logprobs["tokens"]) out.push_back(std::stoi(t.get<std::string>().substr(9)));
  return out;
}

class http_client {
 public:
  explicit http_client(uint16_t port) : conn_("127.0.0.1", port) {}

  void send(const std::string& bytes) { conn_.send_raw(bytes); }
  void post(const std::string& path, const std::string& json) {
    send("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(json.size()) + "\r\n\r\n" + json);
  }
  void get(const std::string& path) { send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"); }
  void del(const std::string& path) { send("DELETE " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"); }

  // The next whole response; throws std::runtime_error on a timeout or an early close.
  http_reply read(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    deadline_ = std::chrono::steady_clock::now() + timeout;
    http_reply r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) fill();
    r.head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    r.status = std::stoi(r.head.substr(9, 3));
    if (r.status == 100) return read(timeout);
    // Header names in any case (HAProxy, for one, writes them in lower case); `name` is lower case.
    std::string lower_head = r.head;
    for (auto& ch : lower_head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    auto header = [&](const std::string& name) -> std::string {
      auto p = lower_head.find("\r\n" + name + ":");
      if (p == std::string::npos) return "";
      p += name.size() + 3;
      while (p < r.head.size() && r.head[p] == ' ') ++p;
      return r.head.substr(p, r.head.find("\r\n", p) - p);
    };
    if (header("transfer-encoding") == "chunked") {
      for (;;) {
        size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) fill();
        const size_t n = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + n + 2) fill();
        r.body += buf_.substr(eol + 2, n);
        buf_.erase(0, eol + 2 + n + 2);
        if (n == 0) break;
      }
    } else {
      const size_t n = std::stoul(header("content-length"));
      while (buf_.size() < n) fill();
      r.body = buf_.substr(0, n);
      buf_.erase(0, n);
    }
    r.closed = header("connection") == "close";
    return r;
  }

  // Reads until the response head and at least `bytes` more have come (a stream under way).
  void read_some(size_t bytes) {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (buf_.size() < bytes) fill();
  }

  // True once the server closed the connection (within `timeout`).
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    deadline_ = std::chrono::steady_clock::now() + timeout;
    try {
      for (;;) fill();
    } catch (const std::runtime_error& e) {
      return std::string(e.what()) == "closed";
    }
  }

  // What has come and not been read as a whole response yet (a stream under way, its head too).
  const std::string& received() const { return buf_; }

  int fd() const { return conn_.fd(); }

 private:
  void fill() {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("timeout");
    pollfd p{conn_.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) throw std::runtime_error("timeout");
    char b[65536];
    const ssize_t n = ::recv(conn_.fd(), b, sizeof b, 0);
    if (n <= 0) throw std::runtime_error("closed");
    buf_.append(b, static_cast<size_t>(n));
  }

  client::connection conn_;
  std::string buf_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace troupe::e2e
