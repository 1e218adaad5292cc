// End to end: several completions of one request (`n`). Completion i is exactly the request alone
// with seed + i (greedy: all the same), through batching, chunked prefill and preemption; the
// siblings start from the first one's cached prompt; every event names its completion; a cancel
// ends all of them; the connection's limit counts completions; a refused request frees its id.
// A batch of prompts likewise, n completions of each.
#include "tests/actors/e2e_fixture.hpp"

#include <set>

using namespace troupe;
using namespace troupe::e2e;

namespace {

std::vector<int32_t> counting_prompt(int32_t first, int32_t len) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(first + 7 * i);
  return p;
}

// Every completion equals the request sent alone with seed + i.
void check_against_references(const std::vector<client::completion>& got, const wire::generate_request& r) {
  BOOST_REQUIRE(got.size() == static_cast<size_t>(r.n));
  for (int32_t i = 0; i < r.n; ++i) {
    auto one = r;
    one.n = 1;
    if (one.sampling.seed) *one.sampling.seed += static_cast<uint64_t>(i);
    const auto& c = got[static_cast<size_t>(i)];
    BOOST_TEST(c.ids == reference(tiny_dense(), one), boost::test_tools::per_element());
    BOOST_TEST(c.done.index.value_or(-1) == i);
    BOOST_TEST((c.done.reason == wire::finish_reason::length));
    BOOST_TEST(c.done.usage.prompt_tokens == static_cast<int64_t>(r.prompt_ids.size()));
    BOOST_TEST(c.done.usage.completion_tokens == static_cast<int64_t>(c.ids.size()));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_n)

BOOST_AUTO_TEST_CASE(completion_i_is_the_request_with_seed_plus_i) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("n4", counting_prompt(100, 70), 6, /*seed=*/5);
  r.n = 4;
  auto got = cl.complete_all(r);
  check_against_references(got, r);
  // The first computes the prompt; the others wait for its blocks: (70 - 1) / 16 = 4 blocks.
  BOOST_TEST(got[0].done.usage.cached_prompt_tokens == 0);
  for (size_t i = 1; i < got.size(); ++i) BOOST_TEST(got[i].done.usage.cached_prompt_tokens == 64);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& c : got) distinct.insert(c.ids);
  BOOST_TEST(distinct.size() > 1u);  // different seeds: not four copies of one output

  r.id = "n4-whole";
  r.stream = false;
  auto whole = cl.complete_all(r);
  for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(whole[i].ids == got[i].ids, boost::test_tools::per_element());
  // vLLM's request_max_num_generation_tokens: once per prompt, the longest of its completions.
  BOOST_TEST(eventually([&] { return metric(*srv, "request_max_num_generation_tokens_count") == 2.0; }));
  BOOST_TEST(metric(*srv, "request_max_num_generation_tokens_sum") == 12.0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(greedy_completions_agree_and_every_event_names_its_completion) {
  auto cfg = test_config();
  cfg.long_prefill_token_threshold = 16;  // a prompt goes 16 tokens a step, leaving room beside it
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("g3", counting_prompt(300, 50), 5);
  r.n = 3;
  auto s = cl.generate(r);
  std::map<int32_t, std::vector<int32_t>> ids;
  while (auto t = s.next()) {
    BOOST_REQUIRE(t->index.has_value());
    ids[*t->index].insert(ids[*t->index].end(), t->ids.begin(), t->ids.end());
  }
  BOOST_TEST(ids.size() == 3u);
  auto want = reference(tiny_dense(), ids_request("one", counting_prompt(300, 50), 5));
  for (const auto& [i, got] : ids) BOOST_TEST(got == want, boost::test_tools::per_element());
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(s.dones()[i].index.value_or(-1) == static_cast<int32_t>(i));
  // The prompt takes four steps; the siblings wait for all of its full blocks ((50 - 1) / 16 = 3)
  // rather than joining the first step and computing it all beside it.
  BOOST_TEST(s.dones()[0].usage.cached_prompt_tokens == 0);
  BOOST_TEST(s.dones()[1].usage.cached_prompt_tokens == 48);
  BOOST_TEST(s.dones()[2].usage.cached_prompt_tokens == 48);
  // A request with n == 1 names no index.
  auto one = cl.generate(ids_request("plain", counting_prompt(300, 50), 2));
  while (auto t = one.next()) BOOST_TEST(!t->index.has_value());
  BOOST_TEST(!one.done().index.has_value());
}

BOOST_AUTO_TEST_CASE(a_tiny_pool_preempts_completions_and_each_is_still_right) {
  auto cfg = test_config();
  cfg.num_kv_blocks = 16;  // one max_model_len (256) sequence; four completions of ~130 tokens
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("tight", counting_prompt(40, 30), 100, /*seed=*/9);
  r.n = 4;
  check_against_references(cl.complete_all(r), r);
  BOOST_TEST(metric(*srv, "num_preemptions_total") > 0.0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(a_cancel_ends_every_completion_and_frees_the_id) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("c", counting_prompt(10, 20), 200, 3);
  r.n = 3;
  auto s = cl.generate(r);
  BOOST_REQUIRE(s.next().has_value());
  cl.cancel("c");
  std::set<int32_t> indexes;
  for (const auto& d : s.dones()) {
    BOOST_TEST((d.reason == wire::finish_reason::cancelled));
    indexes.insert(d.index.value_or(-1));
  }
  BOOST_TEST((indexes == std::set<int32_t>{0, 1, 2}));
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  auto again = ids_request("c", counting_prompt(10, 20), 2);
  BOOST_TEST(cl.complete(again).ids.size() == 2u);  // the id is free again
}

BOOST_AUTO_TEST_CASE(the_connection_limit_counts_completions_and_refusals_free_the_id) {
  auto cfg = test_config();
  cfg.max_requests_per_connection = 4;
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto big = ids_request("big", counting_prompt(10, 10), 2);
  big.n = 5;
  try {
    cl.complete_all(big);
    BOOST_FAIL("n = 5 on a connection allowed 4 sequences was served");
  } catch (const client::request_error& e) {
    BOOST_TEST((e.error().code == wire::error_code::too_many_requests));
    BOOST_TEST(std::string(e.what()).find("asks for 5") != std::string::npos, e.what());
  }
  auto three = ids_request("three", counting_prompt(10, 10), 150, 1);
  three.n = 3;
  auto running = cl.generate(three);
  auto two = ids_request("two", counting_prompt(10, 10), 2);
  two.n = 2;
  BOOST_CHECK_THROW(cl.complete_all(two), client::request_error);  // 3 + 2 > 4
  cl.cancel("three");
  running.dones();
  BOOST_TEST(cl.complete_all(two).size() == 2u);  // room again once the three ended

  // Refused while building (an id outside the vocabulary): one error, and the id is free again.
  auto bad = ids_request("bad", {1, 999999}, 2);
  bad.n = 3;
  BOOST_CHECK_THROW(cl.complete_all(bad), client::request_error);
  auto good = ids_request("bad", {1, 2}, 2);
  good.n = 3;
  BOOST_TEST(cl.complete_all(good).size() == 3u);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// A batch of prompts (`prompts`) is n completions of each: through a pool that forces preemption
// each is its prompt alone with seed + j; a cancel ends them all; the connection's limit counts
// all of them; a batch refused while building (one bad prompt) frees its id; blocks come back.
BOOST_AUTO_TEST_CASE(a_batch_of_prompts_preempts_cancels_and_counts_as_its_completions) {
  auto cfg = test_config();
  cfg.num_kv_blocks = 16;
  cfg.max_requests_per_connection = 6;
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("batch", {}, 90, /*seed=*/4);
  r.prompt_ids.clear();
  const std::vector<std::vector<int32_t>> prompts = {counting_prompt(40, 30), counting_prompt(5, 12), counting_prompt(90, 25)};
  for (const auto& p : prompts) r.prompts.push_back({wire::prompt_kind::ids, {}, p});
  r.n = 2;
  const auto got = cl.complete_all(r);
  BOOST_REQUIRE_EQUAL(got.size(), 6u);
  for (size_t i = 0; i < got.size(); ++i) {
    auto one = ids_request("one", prompts[i / 2], 90, 4 + static_cast<int64_t>(i % 2));
    BOOST_TEST(got[i].ids == reference(tiny_dense(), one), boost::test_tools::per_element());
    BOOST_TEST(got[i].done.index.value_or(-1) == static_cast<int32_t>(i));
  }
  BOOST_TEST(metric(*srv, "num_preemptions_total") > 0.0);
  // Seven completions on a connection allowed six: refused whole.
  auto big = r;
  big.id = "big";
  big.prompts.push_back({wire::prompt_kind::ids, {}, {1, 2}});
  BOOST_CHECK_THROW(cl.complete_all(big), client::request_error);
  // A cancel ends every completion of every prompt.
  auto c = r;
  c.id = "c";
  c.max_tokens = 200;
  auto s = cl.generate(c);
  BOOST_REQUIRE(s.next().has_value());
  cl.cancel("c");
  std::set<int32_t> indexes;
  for (const auto& d : s.dones()) indexes.insert(d.index.value_or(-1));
  BOOST_TEST((indexes == std::set<int32_t>{0, 1, 2, 3, 4, 5}));
  // One prompt outside the vocabulary refuses the batch; the id is free again after.
  auto bad = r;
  bad.id = "bad";
  bad.prompts[1].ids = {1, 999999};
  try {
    cl.complete_all(bad);
    BOOST_FAIL("a batch with a bad prompt was served");
  } catch (const client::request_error& e) {
    BOOST_TEST(std::string(e.what()).find("prompts[1]: ") != std::string::npos, e.what());
  }
  bad.prompts[1].ids = {1, 2};
  bad.max_tokens = 2;
  BOOST_TEST(cl.complete_all(bad).size() == 6u);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(prompt_logprobs_come_once_on_the_first_completion) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto r = ids_request("pl", counting_prompt(500, 40), 3, 2);
  r.prompt_logprobs = 1;
  r.n = 2;
  auto got = cl.complete_all(r);
  BOOST_REQUIRE(got[0].done.prompt_logprobs.has_value());
  BOOST_TEST(got[0].done.prompt_logprobs->size() == 39u);
  BOOST_TEST(!got[1].done.prompt_logprobs.has_value());
  check_against_references(got, r);
}

BOOST_AUTO_TEST_SUITE_END()
