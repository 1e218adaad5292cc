#include "bench/serving/load_http.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "examples/cpp/troupe_client.hpp"

namespace troupe::bench {

namespace {

using clock = std::chrono::steady_clock;

struct http_stream {
  size_t index = 0;
  std::unique_ptr<client::connection> conn;
  std::string buf;  // raw response bytes not yet scanned
  bool head_seen = false;
};

std::string request_bytes(const load_request& r) {
  nlohmann::json body = {{"prompt", r.prompt},          {"max_tokens", r.max_tokens},
                         {"ignore_eos", true},         {"temperature", 0},
                         {"stream", true},             {"stream_options", {{"include_usage", true}}}};
  const auto b = body.dump();
  return "POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(b.size()) + "\r\n\r\n" + b;
}

// Consumes the complete SSE events in s.buf (chunk-size lines sit between events and are
// skipped); returns true at "data: [DONE]".
bool scan(http_stream& s, load_result& r, double t) {
  if (!s.head_seen) {
    auto end = s.buf.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    if (s.buf.compare(0, 12, "HTTP/1.1 200") != 0)
      throw std::runtime_error("request " + std::to_string(s.index) + " refused: " + s.buf.substr(0, 400));
    s.head_seen = true;
    s.buf.erase(0, end + 4);
  }
  size_t at;
  while ((at = s.buf.find("data: ")) != std::string::npos) {
    auto end = s.buf.find("\n\n", at);
    if (end == std::string::npos) break;
    const auto data = s.buf.substr(at + 6, end - at - 6);
    s.buf.erase(0, end + 2);
    if (data == "[DONE]") {
      r.done_s = t;
      return true;
    }
    auto j = nlohmann::json::parse(data);
    if (j.contains("error")) throw std::runtime_error("request " + std::to_string(s.index) + " failed: " + data);
    if (j["usage"].is_object()) r.completion_tokens = j["usage"]["completion_tokens"].get<int64_t>();
    if (j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    if (!c["finish_reason"].is_null()) r.finish_reason = c["finish_reason"].get<std::string>();
    if (!c["text"].get<std::string>().empty()) {  // a token's text (a partial character waits for the next)
      if (r.first_token_s < 0) r.first_token_s = t;
      r.token_s.push_back(t);
    }
  }
  return false;
}

}  // namespace

std::vector<load_result> run_load_http(uint16_t http_port, const std::vector<load_request>& reqs, int max_concurrency) {
  std::vector<load_result> out(reqs.size());
  std::vector<http_stream> live;
  const auto t0 = clock::now();
  auto now_s = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  size_t next = 0, done = 0;
  while (done < reqs.size()) {
    while (next < reqs.size() && static_cast<int>(live.size()) < max_concurrency && reqs[next].arrival_s <= now_s()) {
      http_stream s;
      s.index = next;
      s.conn = std::make_unique<client::connection>("127.0.0.1", http_port);
      out[next].sent_s = now_s();
      s.conn->send_raw(request_bytes(reqs[next]));
      live.push_back(std::move(s));
      ++next;
    }
    double wait_s = 0.2;
    if (next < reqs.size() && static_cast<int>(live.size()) < max_concurrency)
      wait_s = std::max(0.0, reqs[next].arrival_s - now_s());
    std::vector<pollfd> fds;
    for (const auto& s : live) fds.push_back({s.conn->fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait_s * 1000)) <= 0) continue;
    const double t = now_s();
    for (size_t i = 0; i < live.size();) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        ++i;
        continue;
      }
      auto& s = live[i];
      char b[65536];
      const ssize_t n = ::recv(s.conn->fd(), b, sizeof b, 0);
      if (n <= 0) throw std::runtime_error("request " + std::to_string(s.index) + ": the server closed the connection");
      s.buf.append(b, static_cast<size_t>(n));
      if (scan(s, out[s.index], t)) {
        ++done;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  return out;
}

}  // namespace troupe::bench
