// What the multi-process tests ask `troupe serve` processes and check their answers against:
// greedy requests over token ids, the single-process reference on the same golden checkpoint (the
// generator `troupe generate` runs), and a replica's Prometheus text.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::testing {

inline const std::string replica_model_dir = TROUPE_TEST_DATA_DIR "/golden/tiny-dense";

inline wire::generate_request greedy(const std::string& id, const std::vector<int32_t>& prompt, int32_t max_tokens) {
  wire::generate_request r;
  r.id = id;
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids = prompt;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0;
  return r;
}

// The greedy continuation of `prompt` on replica_model_dir, computed in this process.
inline std::vector<int32_t> cold(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  static auto ck = load_checkpoint(replica_model_dir);
  generate_options o;
  o.max_tokens = max_tokens;
  o.sampling = defaults_from(ck->generation);
  o.sampling.temperature = 0;
  o.sampling.ignore_eos = true;
  generator g(*ck);
  return g.generate(prompt, o).ids;
}

inline std::vector<int32_t> random_ids(std::mt19937& rng, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = static_cast<int32_t>(rng() % 4000);
  return v;
}

// GET /metrics from a replica's metrics port ("" when it does not answer).
inline std::string scrape_metrics(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
    (void)::write(fd, req.data(), req.size());
    char buf[8192];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The samples of troupe:<name> (any labels) in a replica's metrics, in order.
inline std::vector<double> metric_samples(uint16_t port, const std::string& name) {
  std::istringstream lines(scrape_metrics(port));
  const std::string head = "troupe:" + name;
  std::vector<double> out;
  for (std::string l; std::getline(lines, l);)
    if (l.rfind(head, 0) == 0 && l.size() > head.size() && (l[head.size()] == '{' || l[head.size()] == ' '))
      out.push_back(std::stod(l.substr(l.rfind(' ') + 1)));
  return out;
}

// The first sample of troupe:<name>, or -1 when there is none.
inline double metric(uint16_t port, const std::string& name) {
  const auto s = metric_samples(port, name);
  return s.empty() ? -1 : s.front();
}

// The sum over every label set of troupe:<name>.
inline double metric_sum(uint16_t port, const std::string& name) {
  double sum = 0;
  for (double v : metric_samples(port, name)) sum += v;
  return sum;
}

}  // namespace troupe::testing
