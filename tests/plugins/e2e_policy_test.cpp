// Policies end to end: an in-process `troupe serve` (tiny dense model) under load, clients over
// loopback TCP. priority: high-priority time to first token p99 <= 30% of low-priority's;
// fair-share: two saturating tenants weighted 3:1 get output tokens 3:1 within 10%; swapping
// policies mid-run through the admin request loses no request (every output equals the
// single-request reference); a misbehaving plugin falls back to fcfs and the metrics say so.
#define BOOST_TEST_MODULE plugins_e2e
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "actors/server.hpp"
#include "examples/cpp/troupe_client.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"

using namespace troupe;
using clk = std::chrono::steady_clock;

namespace {

const std::string tiny_dense = TROUPE_TEST_DATA_DIR "/golden/tiny-dense";

serve::server_config base_config() {
  serve::server_config c;
  c.port = 0;
  c.metrics_port = -1;
  c.http_port = -1;
  c.num_kv_blocks = 512;
  c.max_model_len = 256;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 256;
  c.shutdown_grace_ms = 0;
  // One engine thread: these tests time the policies, not the kernels, and a two-thread team on a
  // shared 2-core box waits at every parallel region for a thread that other processes' time
  // slices hold back (one priority run of 0.12 s took 0.4-16 s beside three busy loops; 0.17-0.43
  // s with one thread: docs/engine.md, "Threads").
  c.threads = 1;
  return c;
}

std::unique_ptr<actors::server> start(const serve::server_config& c) {
  actors::server_options o;
  o.cfg = c;
  o.model_dir = tiny_dense;
  return std::make_unique<actors::server>(o);
}

wire::generate_request request(std::string id, std::mt19937& rng, int32_t max_tokens, int32_t priority = 0,
                               std::string tenant = "", bool stream = false) {
  wire::generate_request r;
  r.id = std::move(id);
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids.resize(4 + rng() % 8);
  for (auto& t : r.prompt_ids) t = static_cast<int32_t>(rng() % 4000);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0;
  r.priority = priority;
  r.tenant = std::move(tenant);
  r.stream = stream;
  return r;
}

// What `troupe generate` gives for the request alone (greedy).
std::vector<int32_t> reference(const wire::generate_request& r) {
  static auto ck = load_checkpoint(tiny_dense);
  generate_options o;
  o.max_tokens = *r.max_tokens;
  o.sampling = defaults_from(ck->generation);
  o.sampling.temperature = 0;
  o.sampling.ignore_eos = true;
  generator g(*ck);
  return g.generate(r.prompt_ids, o).ids;
}

// Reads events until `n` done events arrived; fails on an error event.
std::map<std::string, wire::done_event> read_dones(client::connection& c, size_t n) {
  std::map<std::string, wire::done_event> dones;
  while (dones.size() < n) {
    auto ev = c.next_event(std::chrono::seconds(120));
    BOOST_REQUIRE_MESSAGE(ev.has_value(), "no event within 120 s after " << dones.size() << " done");
    if (auto* e = std::get_if<wire::wire_error>(&*ev)) BOOST_FAIL("error event: " << e->message);
    if (auto* d = std::get_if<wire::done_event>(&*ev)) dones.emplace(d->id, *d);
  }
  return dones;
}

double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

struct ttft_split {
  double high_p99 = 0, low_p99 = 0;
  std::string detail;  // what a failure prints: the queue and the TTFTs
};

// Load with a deep queue: 300 low-priority (5) requests; once every one of them has reached the
// scheduler (waiting, running or finished), 16 high-priority (0) ones. 4 slots, 8 tokens each:
// about 75 waves of admissions. A high request still waits for a running one to finish (no
// preemption for priority: the scheduler keeps the mechanics), so its TTFT is its own trip through
// the gateway and the tokenizer plus a few waves; a low one's p99 is nearly the whole run. Under
// fcfs the high ones wait behind the whole queue. Waiting for all 300 (not for some of them) keeps
// the answer from hanging on how fast requests trickle through the gateway and the tokenizer
// workers of a busy machine: were low requests still on their way, the high ones would queue
// behind them there, and a CI box slowed tenfold once made that trip most of the run.
ttft_split priority_load(const std::string& policy, const std::string& config) {
  auto c = base_config();
  c.policy = policy;
  c.policy_config = config;
  c.max_requests_per_connection = 512;
  auto srv = start(c);
  client::connection conn("127.0.0.1", srv->port());
  std::mt19937 rng(11);
  std::map<std::string, bool> high;
  auto send = [&](const std::string& id, bool h) {
    high[id] = h;
    conn.send(request(id, rng, 8, h ? 0 : 5));
  };
  for (int i = 0; i < 300; ++i) send("l" + std::to_string(i), false);
  auto at_scheduler = [&] {
    const auto& m = srv->metrics();
    return m.waiting() + m.running() + m.finished();
  };
  auto until = clk::now() + std::chrono::seconds(60);
  while (at_scheduler() < 300 && clk::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BOOST_REQUIRE_MESSAGE(at_scheduler() >= 300, "only " << at_scheduler() << " of 300 requests reached the scheduler");
  const int64_t queued = srv->metrics().waiting();
  BOOST_REQUIRE_MESSAGE(queued >= 150, "only " << queued << " requests wait: too short a queue to tell policies apart");
  for (int i = 0; i < 16; ++i) send("h" + std::to_string(i), true);
  std::vector<double> hi, lo;
  for (const auto& [id, d] : read_dones(conn, 316)) {
    BOOST_TEST(to_string(d.reason) == "length");
    (high[id] ? hi : lo).push_back(d.timings.ttft_ms);
  }
  std::sort(hi.begin(), hi.end());
  std::sort(lo.begin(), lo.end());
  std::ostringstream d;
  for (double x : hi) d << int(x) << " ";
  d << "| ";
  for (size_t i = 0; i < lo.size(); i += 8) d << int(lo[i]) << " ";
  BOOST_TEST_MESSAGE(policy << " TTFT ms (high | every 8th low): " << d.str());
  return {p99(hi), p99(lo), std::to_string(queued) + " waiting when the high ones were sent; TTFT ms (high | every 8th low): " + d.str()};
}

std::string metrics_text(actors::server& s) { return s.metrics().render(); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(priority_serves_high_priority_first_under_load) {
  // Wall-clock latencies on a shared 2-core machine: a burst of load from other processes while
  // the high-priority requests wait (and not later) can stretch their few waves past 30% of a
  // run that then finishes fast. Up to three fresh runs; a policy that does not prioritise
  // fails all three (the fcfs control below sits near 1).
  ttft_split prio;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    prio = priority_load("priority", "aging_ms=600000");
    BOOST_TEST_MESSAGE("priority, run " << attempt << ": TTFT p99 high " << prio.high_p99 << " ms, low "
                                        << prio.low_p99 << " ms, ratio " << prio.high_p99 / prio.low_p99);
    if (prio.high_p99 <= 0.3 * prio.low_p99) break;
  }
  BOOST_TEST(prio.high_p99 <= 0.3 * prio.low_p99, prio.detail);
  // The same load under fcfs: the high-priority requests wait behind the queue like the rest.
  auto fcfs = priority_load("fcfs", "");
  BOOST_TEST_MESSAGE("fcfs: TTFT p99 high " << fcfs.high_p99 << " ms, low " << fcfs.low_p99 << " ms, ratio "
                                           << fcfs.high_p99 / fcfs.low_p99);
  BOOST_TEST(fcfs.high_p99 > 0.5 * fcfs.low_p99, fcfs.detail);
}

namespace {
// One run of two saturating tenants under fair-share 3:1; the ratio of their tokens (a / b) in the
// window in which both were saturated.
double fair_share_ratio() {
  auto c = base_config();
  c.max_num_seqs = 8;
  c.policy = "fair-share";
  c.policy_config = "weight.a=3, weight.b=1";
  auto srv = start(c);
  // Each tenant on its own connection with far more requests than slots; a's backlog is 3x b's
  // so that both stay saturated for about the same time under a 3:1 share.
  struct tenant_run {
    std::string name;
    int requests;
    std::vector<clk::time_point> token_times;
  };
  std::vector<tenant_run> tenants = {{"a", 96, {}}, {"b", 32, {}}};
  std::vector<std::thread> readers;
  std::vector<std::unique_ptr<client::connection>> conns;
  for (auto& t : tenants) {
    conns.push_back(std::make_unique<client::connection>("127.0.0.1", srv->port()));
    std::mt19937 rng(t.name == "a" ? 1 : 2);
    for (int i = 0; i < t.requests; ++i) conns.back()->send(request(t.name + std::to_string(i), rng, 16, 0, t.name, true));
  }
  for (size_t k = 0; k < tenants.size(); ++k)
    readers.emplace_back([&, k] {
      int done = 0;
      while (done < tenants[k].requests) {
        auto ev = conns[k]->next_event(std::chrono::seconds(120));
        if (!ev) break;
        if (auto* t = std::get_if<wire::token_event>(&*ev))
          tenants[k].token_times.insert(tenants[k].token_times.end(), t->ids.size(), clk::now());
        if (std::holds_alternative<wire::done_event>(*ev) || std::holds_alternative<wire::wire_error>(*ev)) ++done;
      }
    });
  for (auto& r : readers) r.join();
  for (auto& t : tenants) BOOST_REQUIRE_EQUAL(t.token_times.size(), static_cast<size_t>(t.requests) * 16);
  // The window in which both were saturated: up to the moment the first of them had received 80%
  // of its tokens (after that its backlog runs dry and the other takes the free slots).
  clk::time_point end = clk::time_point::max();
  for (auto& t : tenants) end = std::min(end, t.token_times[t.token_times.size() * 8 / 10]);
  std::map<std::string, double> in_window;
  for (auto& t : tenants)
    in_window[t.name] = static_cast<double>(std::count_if(t.token_times.begin(), t.token_times.end(),
                                                          [&](clk::time_point x) { return x <= end; }));
  double ratio = in_window["a"] / in_window["b"];
  BOOST_TEST_MESSAGE("fair-share: tokens in the saturated window a=" << in_window["a"] << " b=" << in_window["b"]
                                                                     << " ratio " << ratio);
  return ratio;
}
}  // namespace

BOOST_AUTO_TEST_CASE(fair_share_splits_tokens_by_weight_between_saturating_tenants) {
  // Token receipt times on a shared 2-core machine: a burst of load from other processes (CI runs
  // tests in parallel) can hold one tenant's new requests back for a while. Up to three fresh
  // runs; a policy that does not share tokens by weight fails all three.
  double ratio = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ratio = fair_share_ratio();
    BOOST_TEST_MESSAGE("fair-share, run " << attempt << ": ratio " << ratio);
    if (ratio >= 3 * 0.9 && ratio <= 3 * 1.1) break;
  }
  BOOST_TEST(ratio >= 3 * 0.9);
  BOOST_TEST(ratio <= 3 * 1.1);
}

BOOST_AUTO_TEST_CASE(swapping_policies_mid_run_loses_no_request) {
  auto c = base_config();
  c.admin_token = "s3cret";
  auto srv = start(c);
  client::connection work("127.0.0.1", srv->port()), admin("127.0.0.1", srv->port());
  std::mt19937 rng(5);
  std::map<std::string, wire::generate_request> sent;
  for (int i = 0; i < 48; ++i) {
    auto r = request("w" + std::to_string(i), rng, 12, static_cast<int32_t>(i % 4), i % 3 ? "a" : "b");
    sent[r.id] = r;
    work.send(r);
  }
  auto ask = [&](wire::set_policy_request r) {
    admin.send(r);
    auto ev = admin.next_event(std::chrono::seconds(60));
    BOOST_REQUIRE(ev.has_value());
    return *ev;
  };
  // Swaps while the 48 requests are queued and running, between reads of their results.
  std::map<std::string, wire::done_event> dones = read_dones(work, 4);
  const std::pair<const char*, const char*> swaps[] = {
      {"fair-share", "weight.a=3"}, {"priority", "aging_ms=50"}, {"shortest-first", ""}, {"cache-aware", ""}};
  std::string previous = "fcfs";
  for (auto [name, config] : swaps) {
    auto ev = ask({"s-" + std::string(name), name, config, "s3cret"});
    auto* p = std::get_if<wire::policy_event>(&ev);
    BOOST_REQUIRE_MESSAGE(p, "set_policy " << name << " was not answered with a policy event");
    BOOST_TEST(p->policy == name);
    BOOST_TEST(p->previous == previous);
    previous = name;
    for (auto& [id, d] : read_dones(work, 4)) dones.emplace(id, d);
  }
  // Refused swaps leave the policy in place.
  auto refused = ask({"bad", "no-such-policy", "", "s3cret"});
  BOOST_TEST((std::get<wire::wire_error>(refused).code == wire::error_code::invalid_value));
  BOOST_TEST(contains(std::get<wire::wire_error>(refused).message, "no scheduling policy plugin 'no-such-policy'"));
  auto bad_cfg = ask({"badcfg", "priority", "aging_ms=soon", "s3cret"});
  BOOST_TEST(contains(std::get<wire::wire_error>(bad_cfg).message, "config key 'aging_ms' is 'soon'"));
  auto wrong = ask({"tok", "fcfs", "", "guess"});
  BOOST_TEST((std::get<wire::wire_error>(wrong).code == wire::error_code::forbidden));
  BOOST_TEST(std::get<wire::wire_error>(wrong).id == "tok");

  for (auto& [id, d] : read_dones(work, sent.size() - dones.size())) dones.emplace(id, d);
  BOOST_REQUIRE_EQUAL(dones.size(), sent.size());
  for (const auto& [id, r] : sent) {
    BOOST_TEST_CONTEXT(id) {
      const auto& d = dones.at(id);
      BOOST_TEST(to_string(d.reason) == "length");
      BOOST_TEST(d.ids == reference(r));
    }
  }
  auto text = metrics_text(*srv);
  BOOST_TEST(contains(text, "troupe:policy_swaps_total{model_name=\"tiny-dense\"} 4\n"), text);
  BOOST_TEST(contains(text, "troupe:policy_load_failures_total{model_name=\"tiny-dense\"} 2\n"), text);
  BOOST_TEST(contains(text, "policy=\"cache-aware\",configured=\"cache-aware\"} 1\n"), text);
}

BOOST_AUTO_TEST_CASE(admin_requests_are_off_without_a_token) {
  auto srv = start(base_config());
  client::connection admin("127.0.0.1", srv->port());
  admin.send(wire::set_policy_request{"x", "priority", "", ""});
  auto ev = admin.next_event(std::chrono::seconds(30));
  BOOST_REQUIRE(ev.has_value());
  const auto& e = std::get<wire::wire_error>(*ev);
  BOOST_TEST((e.code == wire::error_code::forbidden));
  BOOST_TEST(contains(e.message, "admin requests are disabled on this server"));
}

BOOST_AUTO_TEST_CASE(a_misbehaving_plugin_falls_back_to_fcfs_and_the_metrics_say_so) {
  auto c = base_config();
  c.policy = TROUPE_ROGUE;
  c.policy_config = "mode=invent,after=3";
  auto srv = start(c);
  client::connection conn("127.0.0.1", srv->port());
  std::mt19937 rng(9);
  std::map<std::string, wire::generate_request> sent;
  for (int i = 0; i < 20; ++i) {
    auto r = request("r" + std::to_string(i), rng, 8);
    sent[r.id] = r;
    conn.send(r);
  }
  auto dones = read_dones(conn, sent.size());
  for (const auto& [id, r] : sent) BOOST_TEST(dones.at(id).ids == reference(r));
  auto text = metrics_text(*srv);
  BOOST_TEST(contains(text, "troupe:policy_fallbacks_total{model_name=\"tiny-dense\"} 1\n"), text);
  BOOST_TEST(contains(text, "policy=\"fcfs\",configured=\"rogue\"} 1\n"), text);
}

BOOST_AUTO_TEST_CASE(a_bad_policy_stops_the_server_from_starting) {
  auto c = base_config();
  c.policy = "no-such-policy";
  try {
    start(c);
    BOOST_FAIL("the server started");
  } catch (const troupe::error& e) {
    BOOST_TEST(contains(e.what(), "config: scheduler.policy = 'no-such-policy': no scheduling policy plugin"), e.what());
  }
  c.policy = TROUPE_BAD_ABI;
  try {
    start(c);
    BOOST_FAIL("the server started");
  } catch (const troupe::error& e) {
    BOOST_TEST(contains(e.what(), "was built for policy ABI version 999 but this server speaks version 1"), e.what());
  }
  c.policy = "fair-share";
  c.policy_config = "weight.a=-3";
  try {
    start(c);
    BOOST_FAIL("the server started");
  } catch (const troupe::error& e) {
    BOOST_TEST(contains(e.what(), "refused its config \"weight.a=-3\""), e.what());
  }
}
