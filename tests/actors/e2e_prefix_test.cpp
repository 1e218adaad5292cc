// End to end: prefix caching in `troupe serve` (in-process server). Greedy outputs with the cache
// on equal outputs with it off, for whole and chunked prompts that share prefixes; a repeated
// prompt reports its cached tokens in usage and in the metrics; an executor restart forgets the
// cached blocks (its pool is gone); a Redis that is down costs nothing but the shared hits.
#include "tests/actors/e2e_fixture.hpp"
#include "tests/actors/http_client.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

// Conversations over one shared system prompt: each turn resends the history plus new tokens.
std::vector<std::vector<int32_t>> chat_prompts(unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> system;
  for (int i = 0; i < 45; ++i) system.push_back(static_cast<int32_t>(rng() % 4000));
  std::vector<std::vector<int32_t>> out;
  for (int conv = 0; conv < 3; ++conv) {
    auto history = system;
    for (int turn = 0; turn < 3; ++turn) {
      for (int i = 0, n = 5 + static_cast<int>(rng() % 30); i < n; ++i)
        history.push_back(static_cast<int32_t>(rng() % 4000));
      out.push_back(history);
    }
  }
  return out;
}

struct served {
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> cached;
};

// Sends the prompts one after another (so later ones can reuse earlier ones' blocks).
served serve_all(actors::server& srv, const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens) {
  client::client cl("127.0.0.1", srv.port());
  served out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = cl.complete(ids_request("p" + std::to_string(i), prompts[i], max_tokens));
    BOOST_REQUIRE((r.done.reason == wire::finish_reason::length));
    out.ids.push_back(r.ids);
    out.cached.push_back(r.done.usage.cached_prompt_tokens);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_prefix)

BOOST_AUTO_TEST_CASE(greedy_outputs_with_the_cache_equal_outputs_without_whole_and_chunked) {
  auto prompts = chat_prompts(11);
  for (int32_t budget : {256, 24}) {  // whole prompts in one step; chunks of at most 24 tokens
    auto on_cfg = test_config();
    on_cfg.max_num_batched_tokens = budget;
    auto off_cfg = on_cfg;
    off_cfg.enable_prefix_caching = false;
    auto on = start(on_cfg);
    auto off = start(off_cfg);
    auto with = serve_all(*on, prompts, 5);
    auto without = serve_all(*off, prompts, 5);
    int64_t hits = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      BOOST_TEST(with.ids[i] == without.ids[i], boost::test_tools::per_element());
      BOOST_TEST(without.cached[i] == 0);
      hits += with.cached[i];
    }
    // Every turn after the first of a conversation, and every first turn after the first
    // conversation (the system prompt: 2 blocks), reuses something.
    BOOST_TEST(with.cached[0] == 0);
    for (size_t i = 1; i < prompts.size(); ++i) BOOST_TEST(with.cached[i] >= 32, "prompt " << i);
    BOOST_TEST(metric(*on, "prefix_cache_hits_total") == static_cast<double>(hits));
    BOOST_TEST(metric(*off, "prefix_cache_hits_total") == -1.0);  // not rendered when off
    BOOST_TEST(eventually([&] { return server_idle(*on); }));
  }
  // Spot-check against the single-request reference.
  BOOST_TEST(serve_all(*start(test_config()), {prompts[4]}, 5).ids[0] ==
                 reference(tiny_dense(), ids_request("r", prompts[4], 5)),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_repeated_prompt_reports_its_cached_tokens) {
  auto srv = start(test_config());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back(100 + 7 * i);
  client::client cl("127.0.0.1", srv->port());
  auto first = cl.complete(ids_request("a", prompt, 4));
  auto second = cl.complete(ids_request("b", prompt, 4));
  BOOST_TEST(first.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(second.done.usage.cached_prompt_tokens == 64);  // (70 - 1) / 16 = 4 blocks
  BOOST_TEST(second.done.usage.prompt_tokens == 70);
  BOOST_TEST(second.ids == first.ids, boost::test_tools::per_element());
  BOOST_TEST(first.ids == reference(tiny_dense(), ids_request("a", prompt, 4)), boost::test_tools::per_element());
  BOOST_TEST(metric(*srv, "prefix_cache_queries_total") == 140.0);
  BOOST_TEST(metric(*srv, "prefix_cache_hits_total") == 64.0);
  BOOST_TEST(metric(*srv, "prefix_cache_hit_rate") == 64.0 / 140.0, boost::test_tools::tolerance(1e-9));
  // Not streamed: the same usage.
  auto r = ids_request("c", prompt, 4);
  r.stream = false;
  auto third = cl.complete(r);
  BOOST_TEST(third.done.usage.cached_prompt_tokens == 64);
}

// vLLM's cache_salt: a prompt cached under one salt is cold under another and without one, and
// warm again under its own; the tokens are the same whichever blocks were reused.
BOOST_AUTO_TEST_CASE(a_cache_salt_keeps_cached_prompts_apart) {
  auto srv = start(test_config());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(300 + 5 * i);
  client::client cl("127.0.0.1", srv->port());
  auto salted = [&](const char* id, const char* salt) {
    auto r = ids_request(id, prompt, 4);
    if (salt) r.cache_salt = salt;
    return cl.complete(r);
  };
  auto a = salted("a", "tenant-a");
  auto b = salted("b", "tenant-b");
  auto plain = salted("c", nullptr);
  auto a2 = salted("d", "tenant-a");
  BOOST_TEST(a.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(b.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(plain.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(a2.done.usage.cached_prompt_tokens == 32);  // (40 - 1) / 16 = 2 blocks
  BOOST_TEST(salted("e", "tenant-b").done.usage.cached_prompt_tokens == 32);
  for (const auto* r : {&b, &plain, &a2}) BOOST_TEST(r->ids == a.ids, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_executor_restart_forgets_the_cached_blocks) {
  auto srv = start(test_config());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 50; ++i) prompt.push_back(900 + 3 * i);
  client::client cl("127.0.0.1", srv->port());
  auto first = cl.complete(ids_request("a", prompt, 4));
  BOOST_TEST(cl.complete(ids_request("b", prompt, 4)).done.usage.cached_prompt_tokens == 48);
  srv->kill_executor();
  BOOST_REQUIRE(eventually([&] { return srv->restarts() == 1; }));
  // The new executor's pool is empty: the blocks must be recomputed, not read as zeros.
  auto after = cl.complete(ids_request("c", prompt, 4));
  BOOST_TEST(after.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(after.ids == first.ids, boost::test_tools::per_element());
  BOOST_TEST(cl.complete(ids_request("d", prompt, 4)).done.usage.cached_prompt_tokens == 48);
}

// vLLM's POST /reset_prefix_cache (dev endpoints on): the next run of a cached prompt is computed
// cold, with the same tokens; refused (409) while a request runs, 404 with the endpoints off,
// behind the API key.
BOOST_AUTO_TEST_CASE(reset_prefix_cache_makes_the_next_prompt_cold) {
  auto c = test_config();
  c.dev_endpoints = true;
  c.api_key = "k";
  c.max_model_len = 4096;
  c.num_kv_blocks = 1024;
  auto srv = start(c);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 50; ++i) prompt.push_back(700 + 5 * i);
  client::client cl("127.0.0.1", srv->port());
  auto first = cl.complete(ids_request("a", prompt, 4));
  BOOST_TEST(cl.complete(ids_request("b", prompt, 4)).done.usage.cached_prompt_tokens == 48);
  http_client h(srv->http_port());
  auto reset = [&](const std::string& auth = "Authorization: Bearer k\r\n") {
    h.send("POST /reset_prefix_cache HTTP/1.1\r\n" + auth + "Content-Length: 0\r\n\r\n");
    return h.read();
  };
  auto r = reset();
  BOOST_TEST(r.status == 200, r.body);
  auto after = cl.complete(ids_request("c", prompt, 4));
  BOOST_TEST(after.done.usage.cached_prompt_tokens == 0);
  BOOST_TEST(after.ids == first.ids, boost::test_tools::per_element());
  BOOST_TEST(cl.complete(ids_request("d", prompt, 4)).done.usage.cached_prompt_tokens == 48);
  BOOST_TEST(reset("").status == 401);

  auto running = cl.generate(ids_request("long", {1, 2, 3}, 3000));
  BOOST_REQUIRE(running.next().has_value());
  r = reset();
  BOOST_TEST(r.status == 409, r.body);
  BOOST_TEST(r.body.find("requests_running") != std::string::npos, r.body);
  cl.cancel("long");
  while (running.next()) {
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  BOOST_TEST(reset().status == 200);
  h.send("GET /reset_prefix_cache HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n");
  BOOST_TEST(h.read().status == 405);

  auto plain = start(test_config());
  http_client p(plain->http_port());
  p.send("POST /reset_prefix_cache HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  r = p.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(r.body.find("dev_endpoints") != std::string::npos, r.body);
}

BOOST_AUTO_TEST_CASE(redis_down_serves_from_the_local_cache_within_the_budget) {
  auto c = test_config();
  c.redis_url = "unix:///tmp/troupe-no-such-dir/redis.sock";
  c.prefix_fetch_budget_ms = 2000;  // far above "at once", so that a loaded machine cannot blur the two
  auto srv = start(c);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(50 + i);
  client::client cl("127.0.0.1", srv->port());
  auto first = cl.complete(ids_request("a", prompt, 3));
  auto second = cl.complete(ids_request("b", prompt, 3));
  BOOST_TEST(first.ids == reference(tiny_dense(), ids_request("a", prompt, 3)), boost::test_tools::per_element());
  BOOST_TEST(second.ids == first.ids, boost::test_tools::per_element());
  BOOST_TEST(second.done.usage.cached_prompt_tokens == 32);
  BOOST_TEST(first.done.timings.queue_ms < 1000.0);  // refused at once, not waited for
  BOOST_TEST(metric(*srv, "prefix_cache_redis_up") == 0.0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// cache-aware admits the waiting request with the longest cached prefix first: it can only do
// that when the scheduler fills seq_view::num_cached_tokens. One sequence at a time; a request
// with nothing cached (C) queues before one whose prompt is cached (B). When the slot frees, the
// policy admits one of them; both are then cancelled: the admitted one has produced tokens, the
// other none. B under cache-aware, C under fcfs (the control).
BOOST_AUTO_TEST_CASE(the_cache_aware_policy_admits_cached_prefixes_first) {
  for (std::string policy : {"cache-aware", "fcfs"}) {
    auto c = test_config();
    c.policy = policy;
    c.max_num_seqs = 1;
    c.max_model_len = 4096;
    c.tokenizer_workers = 1;  // requests reach the scheduler in the order sent (one worker)
    auto srv = start(c);
    std::vector<int32_t> cached, fresh;
    for (int i = 0; i < 40; ++i) {
      cached.push_back(300 + i);
      fresh.push_back(2000 + 5 * i);
    }
    client::client cl("127.0.0.1", srv->port());
    cl.complete(ids_request("warm", cached, 2));
    auto hold = cl.generate(ids_request("hold", {1, 2, 3}, 4000));  // occupies the only slot
    BOOST_REQUIRE(hold.next().has_value());
    auto sc = cl.generate(ids_request("C", fresh, 4000));
    auto sb = cl.generate(ids_request("B", cached, 4000));
    BOOST_REQUIRE(eventually([&] { return metric(*srv, "num_requests_waiting") == 2; }));
    cl.cancel("hold");
    BOOST_REQUIRE(eventually([&] {
      return metric(*srv, "num_requests_running") == 1 && metric(*srv, "num_requests_waiting") == 1;
    }));
    // The waiting one is cancelled first: cancelling the running one first frees the slot, and the
    // waiting one could run a step before its own cancel arrives (fcfs: "B made 4", 1 run in ~500).
    const bool b_first = policy == "cache-aware";
    cl.cancel(b_first ? "C" : "B");
    cl.cancel(b_first ? "B" : "C");
    const auto& b = sb.done();
    const auto& cd = sc.done();
    BOOST_TEST((b.usage.completion_tokens > 0) == b_first, policy << ": B made " << b.usage.completion_tokens);
    BOOST_TEST((cd.usage.completion_tokens > 0) == !b_first, policy << ": C made " << cd.usage.completion_tokens);
    if (b_first) BOOST_TEST(b.usage.cached_prompt_tokens == 32);  // (40 - 1) / 16 = 2 blocks
    while (hold.next()) {
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
