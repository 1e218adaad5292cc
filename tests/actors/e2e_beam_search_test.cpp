// End to end: beam search (`use_beam_search`, vLLM's loop of one-token probes). The n completions
// are exactly the best beams of a reference search whose candidates come from the single-request
// engine's logits of each prompt + beam (the server's probes read the same rows: batch- and
// chunk-invariant, prefix cache or not), in score order; stop ids finish beams; a cancel ends the
// whole search with every probe's blocks back; what does not apply to beams is refused.
#include "tests/actors/e2e_fixture.hpp"
#include "tests/actors/http_client.hpp"

#include "runtime/sampling/logprobs.hpp"
#include "runtime/serve/beam_search.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

// The beams a search of width n over the engine's own logits keeps, best first.
std::vector<serve::beam> reference_beams(const wire::generate_request& r) {
  generator g(tiny_dense());
  serve::beam_search s(static_cast<int64_t>(r.prompt_ids.size()), r.n, *r.max_tokens, r.stop_ids, r.length_penalty,
                       r.include_stop_str_in_output);
  const int64_t vocab = tiny_dense().config.vocab_size;
  while (!s.done()) {
    std::vector<std::vector<std::pair<int32_t, double>>> next;
    for (const auto& b : s.live()) {
      auto seq = r.prompt_ids;
      seq.insert(seq.end(), b.tokens.begin(), b.tokens.end());
      const auto logits = g.prompt_logits(seq);
      std::span<const float> last(logits.data() + (static_cast<int64_t>(seq.size()) - 1) * vocab, static_cast<size_t>(vocab));
      next.push_back(logprobs_of(last, 0, s.candidates_per_beam()).top);
    }
    s.advance(next);
  }
  return s.best();
}

std::vector<int32_t> random_ids(unsigned seed, int n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng() % 4000));
  return p;
}

// A greedy ids request made a beam search of width n.
wire::generate_request beams_request(std::string id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t n) {
  auto r = ids_request(std::move(id), std::move(prompt), max_tokens);
  r.use_beam_search = true;
  r.n = n;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_beam_search)

BOOST_AUTO_TEST_CASE(completions_are_the_reference_search_best_beams) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto r = beams_request("beams", random_ids(3, 37), 6, 3);
  const auto want = reference_beams(r);
  BOOST_REQUIRE(want.size() == 3u);
  auto got = cl.complete_all(r);
  BOOST_REQUIRE(got.size() == 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST_CONTEXT("beam " << i) {
      BOOST_TEST(got[i].ids == want[i].tokens, boost::test_tools::per_element());
      BOOST_TEST((got[i].done.reason == wire::finish_reason::length));
      BOOST_TEST(got[i].done.index.value_or(-1) == static_cast<int32_t>(i));
      BOOST_TEST(got[i].done.usage.prompt_tokens == 37);
      BOOST_TEST(got[i].done.usage.completion_tokens == 6);
    }
  }
  // A wider search is not greedy decoding: the best beam scores at least as well as the greedy path.
  auto greedy = ids_request("greedy", r.prompt_ids, 6);
  const auto g = reference(tiny_dense(), greedy);
  BOOST_TEST(want[0].cum_logprob >= reference_beams([&] {
    auto one = r;
    one.n = 1;
    return one;
  }())[0].cum_logprob - 1e-9);
  BOOST_TEST_MESSAGE("greedy " << (g == want[0].tokens ? "equals" : "differs from") << " the best beam");

  // A stop id ends the beams that pick it (left out of the text, finish reason stop); the
  // length penalty reorders finished against live ones as the reference does.
  auto s = r;
  s.id = "stopping";
  s.stop_ids = {want[0].tokens[2], want[1].tokens[1]};
  s.length_penalty = 0.5;
  const auto want_s = reference_beams(s);
  auto got_s = cl.complete_all(s);
  BOOST_REQUIRE(got_s.size() == want_s.size());
  bool any_stopped = false;
  for (size_t i = 0; i < got_s.size(); ++i) {
    BOOST_TEST(got_s[i].ids == want_s[i].tokens, boost::test_tools::per_element());
    BOOST_TEST((got_s[i].done.reason == (want_s[i].stopped ? wire::finish_reason::stop : wire::finish_reason::length)));
    any_stopped = any_stopped || want_s[i].stopped;
  }
  BOOST_TEST(any_stopped);
  // Each search is one request for vLLM's request_max_num_generation_tokens: its longest beam.
  BOOST_TEST(metric(*srv, "request_max_num_generation_tokens_count") == 2.0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// The OpenAI API's use_beam_search (vLLM's): choices are the beams, best first, streamed or not.
BOOST_AUTO_TEST_CASE(openai_completions_serve_beam_search) {
  auto srv = start(test_config());
  http_client c(srv->http_port());
  auto r = beams_request("beams", random_ids(7, 21), 5, 2);
  const auto want = reference_beams(r);
  for (bool stream : {false, true}) {
    BOOST_TEST_CONTEXT("stream " << stream) {
      c.post("/v1/completions", nlohmann::json({{"prompt", r.prompt_ids}, {"max_tokens", 5}, {"ignore_eos", true},
                                                {"use_beam_search", true}, {"n", 2}, {"stream", stream},
                                                {"return_token_ids", true}})
                                    .dump());
      auto reply = c.read();
      BOOST_TEST_REQUIRE(reply.status == 200, reply.body);
      std::vector<std::vector<int32_t>> ids(2);
      if (stream) {
        for (const auto& e : sse_events(reply.body))
          if (e != "[DONE]")
            for (const auto& ch : e["choices"])
              for (const auto& t : ch.value("token_ids", nlohmann::json::array())) ids.at(ch["index"]).push_back(t);
      } else {
        const auto body = nlohmann::json::parse(reply.body);  // not a temporary: the loop holds its member
        for (const auto& ch : body["choices"]) ids.at(ch["index"]) = ch["token_ids"].get<std::vector<int32_t>>();
      }
      for (size_t i = 0; i < 2; ++i) BOOST_TEST(ids[i] == want[i].tokens, boost::test_tools::per_element());
    }
  }
}

// Beams end at max_model_len (finish reason length) as a sequence does: no probe outgrows it.
BOOST_AUTO_TEST_CASE(beams_end_at_max_model_len) {
  auto cfg = test_config();
  cfg.max_model_len = 32;
  cfg.num_kv_blocks = 64;
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto r = beams_request("edge", random_ids(6, 28), 10, 2);
  auto got = cl.complete_all(r);
  BOOST_REQUIRE(got.size() == 2u);
  auto capped = r;
  capped.max_tokens = 4;  // what fits: 28 + 4 = 32
  const auto want = reference_beams(capped);
  for (size_t i = 0; i < 2; ++i) {
    BOOST_TEST(got[i].ids == want[i].tokens, boost::test_tools::per_element());
    BOOST_TEST((got[i].done.reason == wire::finish_reason::length));
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// A cancel ends every completion of the search (cancelled) and its probes leave the scheduler.
BOOST_AUTO_TEST_CASE(a_cancel_ends_the_whole_search) {
  // Long enough that the cancel comes first: 200 tokens of the tiny model took under the 100 ms
  // wait on a quiet machine, and the beams ended by length.
  auto cfg = test_config();
  cfg.max_model_len = 4096;
  cfg.num_kv_blocks = 4096;
  auto srv = start(cfg);
  client::client cl("127.0.0.1", srv->port());
  auto r = beams_request("long-beams", random_ids(4, 20), 4000, 4);
  auto st = cl.generate(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cl.cancel("long-beams");
  while (st.next()) {
  }
  BOOST_REQUIRE(st.dones().size() == 4u);
  for (const auto& d : st.dones()) BOOST_TEST((d.reason == wire::finish_reason::cancelled));
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(what_does_not_apply_to_beams_is_refused) {
  auto srv = start(test_config());
  client::client cl("127.0.0.1", srv->port());
  auto r = beams_request("wide", random_ids(5, 8), 4, 11);
  auto refused = [&](const std::string& needle) {
    BOOST_CHECK_EXCEPTION(cl.complete_all(r), client::request_error, [&](const client::request_error& e) {
      BOOST_TEST_MESSAGE(e.what());
      return std::string(e.what()).find(needle) != std::string::npos;
    });
  };
  refused("beam width");
  r.n = 2;
  r.logprobs = 1;
  r.id = "lp";
  refused("'logprobs' does not apply");
}

BOOST_AUTO_TEST_SUITE_END()
