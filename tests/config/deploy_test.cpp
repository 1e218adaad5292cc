// config/deploy as shipped: HAProxy (haproxy.cfg, unchanged) in front of two `troupe serve`
// processes sharing one redis-server. Clients behind it get exactly what one server gives; the
// replicas share prompt prefixes through Redis; a replica that crashes costs no request; the
// health check is the protocol's own `health` exchange; and every series the Grafana dashboard
// queries is one the server exports.
#define BOOST_TEST_MODULE troupe_deploy
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "examples/cpp/troupe_client.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/request_codec.hpp"
#include "tests/actors/http_client.hpp"
#include "tests/runtime/prefix/redis_server.hpp"
#include "tests/runtime/prefix/replica_checks.hpp"
#include "tests/runtime/prefix/replica_process.hpp"

using namespace troupe;
using troupe::testing::redis_server;
using troupe::testing::replica_process;
using namespace troupe::testing;

namespace {

const std::string deploy_dir = TROUPE_SOURCE_DIR "/config/deploy";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The bytes of the hex string that follows `directive` in haproxy.cfg ("" when absent).
std::string config_bytes(const std::string& cfg, const std::string& directive) {
  std::smatch m;
  if (!std::regex_search(cfg, m, std::regex(directive + " +([0-9a-fA-F]+)"))) return "";
  std::string out;
  const std::string hex = m[1];
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string event_frame(const wire::event& e) {
  std::string out;
  wire::append_event_frame(out, e);
  return out;
}

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// haproxy -db -f config/deploy/haproxy.cfg, the addresses in its environment as the file reads them.
class haproxy_process {
 public:
  haproxy_process(const replica_process& r1, const replica_process& r2)
      : port_(free_port()), http_port_(free_port()) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    env.push_back("TROUPE_LB_BIND=127.0.0.1:" + std::to_string(port_));
    env.push_back("TROUPE_REPLICA_1=127.0.0.1:" + std::to_string(r1.port()));
    env.push_back("TROUPE_REPLICA_2=127.0.0.1:" + std::to_string(r2.port()));
    env.push_back("TROUPE_LB_HTTP_BIND=127.0.0.1:" + std::to_string(http_port_));
    env.push_back("TROUPE_REPLICA_1_HTTP=127.0.0.1:" + std::to_string(r1.http_port()));
    env.push_back("TROUPE_REPLICA_2_HTTP=127.0.0.1:" + std::to_string(r2.http_port()));
    std::vector<std::string> args = {TROUPE_HAPROXY, "-db", "-f", deploy_dir + "/haproxy.cfg"};
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, args[0].c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0)
      throw std::runtime_error("cannot start " + args[0]);
  }
  ~haproxy_process() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  uint16_t port() const { return port_; }
  uint16_t http_port() const { return http_port_; }

  // Until a health request through the balancer is answered "ok" (10 s at most).
  bool wait_ready() const {
    for (int i = 0; i < 200; ++i) {
      try {
        client::client c("127.0.0.1", port_);
        if (c.health().status == "ok") return true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Until both replicas pass the HTTP health check (HAProxy answers 503 while none has).
  bool wait_http_ready() const {
    for (int i = 0; i < 200; ++i) {
      try {
        troupe::e2e::http_client c(http_port_);
        c.get("/health");
        if (c.read(std::chrono::seconds(5)).status == 200) return true;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_, http_port_;
};

// One request on its own connection through the balancer (the balancer places connections).
client::completion through(uint16_t port, const wire::generate_request& r) {
  client::client c("127.0.0.1", port);
  return c.complete(r);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_health_check_is_the_protocols_health_exchange) {
  const std::string cfg = read_file(deploy_dir + "/haproxy.cfg");
  std::string request;
  wire::append_frame(request, wire::encode_request(wire::health_request{}));
  BOOST_TEST(config_bytes(cfg, "tcp-check send-binary") == request);
  const std::string expect = config_bytes(cfg, "tcp-check expect binary");
  BOOST_TEST_REQUIRE(!expect.empty());
  // HAProxy passes a check whose reply contains these bytes: an idle or a busy replica's "ok"...
  BOOST_TEST(event_frame(wire::health_event{"", "ok", 0, 0}).find(expect) != std::string::npos);
  BOOST_TEST(event_frame(wire::health_event{"", "ok", 250, 4000}).find(expect) != std::string::npos);
  // ...and never a draining one, nor the refusal an old or wrong request would get.
  BOOST_TEST(event_frame(wire::health_event{"", "draining", 3, 0}).find(expect) == std::string::npos);
  BOOST_TEST(event_frame(wire::wire_error{wire::error_code::shutting_down, "the server is shutting down", ""})
                 .find(expect) == std::string::npos);
}

BOOST_AUTO_TEST_CASE(replicas_behind_haproxy_share_a_cache_and_survive_a_crash) {
  redis_server redis;
  const std::vector<std::string> flags = {"--model", replica_model_dir, "--num-kv-blocks", "128", "--max-model-len", "512",
                                          "--redis", redis.url()};
  replica_process r1(flags), r2(flags);
  haproxy_process lb(r1, r2);
  BOOST_TEST_REQUIRE(lb.wait_ready());
  const double served_before = metric_sum(r1.metrics_port(), "request_success_total") +
                               metric_sum(r2.metrics_port(), "request_success_total");

  // Eight clients at once, each on its own connection: exactly what one server alone gives.
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(random_ids(rng, 24 + 5 * i));
  std::vector<std::vector<int32_t>> got(prompts.size());
  {
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
      clients.emplace_back([&, i] { got[i] = through(lb.port(), greedy("c" + std::to_string(i), prompts[i], 6)).ids; });
    for (auto& t : clients) t.join();
  }
  for (size_t i = 0; i < prompts.size(); ++i) BOOST_TEST(got[i] == cold(prompts[i], 6), boost::test_tools::per_element());
  // leastconn spread them: both replicas served (the health checks' requests are not generates).
  const double s1 = metric_sum(r1.metrics_port(), "request_success_total");
  const double s2 = metric_sum(r2.metrics_port(), "request_success_total");
  BOOST_TEST(s1 >= 1.0);
  BOOST_TEST(s2 >= 1.0);
  BOOST_TEST(s1 + s2 == served_before + 8.0);

  // The OpenAI-compatible API through the balancer's HTTP frontend: streamed and whole, on
  // keep-alive connections, the same tokens (a model without a tokenizer names them token_id:N).
  BOOST_TEST_REQUIRE(lb.wait_http_ready());
  {
    troupe::e2e::http_client c(lb.http_port());
    for (size_t i = 0; i < 4; ++i) {
      const bool stream = i % 2;
      nlohmann::json body = {{"prompt", prompts[i]}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 0}, {"stream", stream}};
      c.post("/v1/completions", body.dump());
      auto r = c.read();
      BOOST_TEST_REQUIRE(r.status == 200, r.body);
      std::vector<int32_t> ids;
      if (!stream) {
        ids = troupe::e2e::logprob_ids(nlohmann::json::parse(r.body)["choices"][0]["logprobs"]);
      } else {
        for (const auto& e : troupe::e2e::sse_events(r.body))
          if (e != "[DONE]" && !e["choices"][0]["logprobs"].is_null())
            for (int32_t t : troupe::e2e::logprob_ids(e["choices"][0]["logprobs"])) ids.push_back(t);
      }
      BOOST_TEST(ids == cold(prompts[i], 6), boost::test_tools::per_element());
    }
  }

  // A shared prefix is computed once, whichever replica the next connection lands on: its
  // own pool or Redis holds the 12 full blocks of the 200 shared tokens.
  auto prefix = random_ids(rng, 200);
  auto pa = prefix, pb = prefix;
  for (int32_t t : random_ids(rng, 9)) pa.push_back(t);
  for (int32_t t : random_ids(rng, 20)) pb.push_back(t);
  auto a = through(lb.port(), greedy("pa", pa, 5));
  BOOST_TEST(a.ids == cold(pa, 5), boost::test_tools::per_element());
  for (int i = 0; i < 500 && redis.command({"DBSIZE"})->integer < 13; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto b = through(lb.port(), greedy("pb", pb, 5));
  BOOST_TEST(b.ids == cold(pb, 5), boost::test_tools::per_element());
  BOOST_TEST(b.done.usage.cached_prompt_tokens == 192);

  // Every troupe: series the dashboard queries exists on a replica serving with Redis.
  const std::string exposition = scrape_metrics(r1.metrics_port());
  const auto dashboard = nlohmann::json::parse(read_file(deploy_dir + "/grafana-dashboard.json"));
  std::set<std::string> names;
  const std::regex metric_re("troupe:([a-zA-Z0-9_]+)");
  for (const auto& p : dashboard.at("panels"))
    for (const auto& t : p.at("targets")) {
      const std::string expr = t.at("expr");
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric_re), end; it != end; ++it) {
        std::string n = (*it)[1];
        for (const std::string suffix : {"_bucket", "_sum", "_count"})
          if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
            n.resize(n.size() - suffix.size());
        names.insert(n);
      }
    }
  BOOST_TEST(names.size() >= 15u);
  for (const auto& n : names)
    BOOST_CHECK_MESSAGE(exposition.find("# TYPE troupe:" + n + " ") != std::string::npos,
                        "the dashboard queries troupe:" << n << ", which the server does not export");

  // Replica 1 crashes. Before any health check notices, new connections that HAProxy sends its
  // way are refused and go to replica 2: no client sees the crash.
  const double r2_before = metric_sum(r2.metrics_port(), "request_success_total");
  r1.crash();
  for (int i = 0; i < 4; ++i) {
    auto p = random_ids(rng, 30);
    BOOST_TEST(through(lb.port(), greedy("after" + std::to_string(i), p, 4)).ids == cold(p, 4),
               boost::test_tools::per_element());
  }
  BOOST_TEST(metric_sum(r2.metrics_port(), "request_success_total") == r2_before + 4.0);
}
