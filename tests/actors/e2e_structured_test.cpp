// Structured output end to end (the full-vocabulary golden model, the real Qwen3 tokenizer): the
// text of every choice, regex, JSON-schema and GBNF request is in its language and ends with EOS
// once complete; seeded requests sent together give what each gives alone (the grammar state
// travels with the sequence through batching); bad specs are refused naming what is wrong.
#include "tests/actors/e2e_fixture.hpp"

#include <algorithm>
#include <regex>

#include <nlohmann/json.hpp>

#include "runtime/grammar/automaton.hpp"
#include "runtime/serve/structured_output.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

constexpr int32_t kImEnd = 151645, kEndOfText = 151643;  // the model's two EOS ids

wire::generate_request structured(std::string id, wire::structured_output s, double temperature, uint64_t seed) {
  wire::generate_request r;
  r.id = std::move(id);
  r.kind = wire::prompt_kind::text;
  r.prompt = "Answer in the format asked:";
  r.max_tokens = 120;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.structured = std::move(s);
  return r;
}

wire::structured_output of(wire::structured_output::kind k, std::string spec, std::vector<std::string> choices = {}) {
  return {k, std::move(spec), std::move(choices)};
}

// The output ended because the grammar was complete and a stop id came.
void check_ended(const client::completion& c) {
  BOOST_TEST((c.done.reason == wire::finish_reason::stop), c.text);
  BOOST_TEST((c.ids.back() == kImEnd || c.ids.back() == kEndOfText));
}

// Each request alone, then all sent together: every output must be the one it had alone.
void together_equals_alone(client::client& cl, const std::vector<wire::generate_request>& reqs) {
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(cl.complete(r).ids);
  std::vector<client::stream> streams;
  for (auto r : reqs) {
    r.id += "-together";
    streams.push_back(cl.generate(r));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<int32_t> ids;
    while (auto t = streams[i].next()) ids.insert(ids.end(), t->ids.begin(), t->ids.end());
    BOOST_TEST(ids == alone[i], boost::test_tools::per_element());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_structured)

BOOST_AUTO_TEST_CASE(outputs_are_in_the_language) {
  using kind = wire::structured_output::kind;
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  const std::vector<std::string> choices = {"red", "green", "blue", "dark blue"};
  const std::regex code("[0-9]{3}-[a-z]{2,4}( #[0-9])?");
  const auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "colour": {"enum": ["red", "green", "blue"]},
      "ok": {"type": "boolean"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
      "note": {"type": ["string", "null"], "maxLength": 10}
    },
    "required": ["colour", "ok", "tags"]
  })");
  for (uint64_t seed = 1; seed <= 3; ++seed)
    for (double temperature : {0.0, 1.0}) {
      const std::string tag = std::to_string(seed) + "-" + std::to_string(static_cast<int>(temperature));
      auto c = cl.complete(structured("choice-" + tag, of(kind::choice, "", choices), temperature, seed));
      check_ended(c);
      BOOST_TEST(std::count(choices.begin(), choices.end(), c.text) == 1, c.text);

      c = cl.complete(structured("regex-" + tag, of(kind::regex, "[0-9]{3}-[a-z]{2,4}( #[0-9])?"), temperature, seed));
      check_ended(c);
      BOOST_TEST(std::regex_match(c.text, code), c.text);

      c = cl.complete(structured("gbnf-" + tag, of(kind::grammar, "root ::= \"<\" [a-c]{1,5} \">\""), temperature, seed));
      check_ended(c);
      BOOST_TEST(std::regex_match(c.text, std::regex("<[a-c]{1,5}>")), c.text);

      c = cl.complete(structured("schema-" + tag, of(kind::json_schema, schema.dump()), temperature, seed));
      check_ended(c);
      const auto v = nlohmann::json::parse(c.text, nullptr, false);
      BOOST_REQUIRE_MESSAGE(!v.is_discarded(), c.text);
      BOOST_TEST(v.is_object());
      BOOST_TEST((v["colour"] == "red" || v["colour"] == "green" || v["colour"] == "blue"), c.text);
      BOOST_TEST(v["ok"].is_boolean());
      BOOST_TEST((v["tags"].is_array() && v["tags"].size() <= 3u), c.text);
      for (const auto& t : v["tags"]) BOOST_TEST((t.is_string() && t.get<std::string>().size() <= 6u * 4), c.text);
      for (const auto& [k, _] : v.items()) BOOST_TEST((k == "colour" || k == "ok" || k == "tags" || k == "note"), k);
    }
  // Any JSON object (OpenAI's json_object): within 120 tokens a random model may not close it, so
  // only the prefix is checked: it starts an object and, if it ended, parses as one.
  auto c = cl.complete(structured("object", of(kind::json_object, ""), 0.0, 1));
  BOOST_TEST(c.text.rfind("{", 0) == 0u, c.text);
  if (c.done.reason == wire::finish_reason::stop) BOOST_TEST(nlohmann::json::parse(c.text).is_object(), c.text);
}

BOOST_AUTO_TEST_CASE(batched_requests_give_what_each_gives_alone) {
  using kind = wire::structured_output::kind;
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  std::vector<wire::generate_request> reqs;
  for (uint64_t i = 0; i < 8; ++i) {
    auto r = structured("b" + std::to_string(i),
                        i % 2 ? of(kind::regex, "([a-z]+ ){2,4}[0-9]{1,3}") : of(kind::json_object, ""), 0.8, 40 + i);
    r.max_tokens = 24;
    reqs.push_back(r);
  }
  together_equals_alone(cl, reqs);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// With separate_reasoning the grammar leaves the think block alone: a prompt that opened one, and
// a bias that makes </think> the model's first choice, gives </think> and then the grammar's text;
// without it the grammar holds from the first token and </think> cannot come.
BOOST_AUTO_TEST_CASE(the_grammar_starts_after_the_reasoning) {
  using kind = wire::structured_output::kind;
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  const int32_t think_end = 151668;  // </think>
  auto r = structured("think", of(kind::choice, "", {"yes", "no"}), 0.0, 1);
  r.prompt = "<|im_start|>user\nIs it?<|im_end|>\n<|im_start|>assistant\n<think>\n";
  r.logit_bias = {{think_end, 100.0}};
  r.separate_reasoning = true;
  auto got = cl.complete(r);
  check_ended(got);
  BOOST_TEST(got.ids.front() == think_end);
  BOOST_TEST((got.text == "yes" || got.text == "no"), got.text);
  BOOST_TEST(got.reasoning.empty(), got.reasoning);
  r.id = "no-think";
  r.separate_reasoning = false;
  got = cl.complete(r);
  check_ended(got);
  BOOST_TEST(got.ids.front() != think_end);
  BOOST_TEST((got.text == "yes" || got.text == "no"), got.text);
}

// Preempted sequences are recomputed with their grammar state intact: a pool that holds one
// sequence at a time, six structured requests sent together, each output what it is alone.
BOOST_AUTO_TEST_CASE(preemption_keeps_the_grammar_state) {
  using kind = wire::structured_output::kind;
  auto c = test_config();
  c.max_model_len = 64;
  c.num_kv_blocks = 4;  // one max_model_len sequence
  auto srv = start(c, full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  std::vector<wire::generate_request> reqs;
  for (uint64_t i = 0; i < 6; ++i) {
    auto r = structured("p" + std::to_string(i),
                        i % 3 == 0   ? of(kind::regex, "([a-z]+ ){2,6}[0-9]{1,3}")
                        : i % 3 == 1 ? of(kind::json_object, "")
                                     : of(kind::choice, "", {"one two three", "four five"}),
                        0.8, 70 + i);
    r.kind = wire::prompt_kind::ids;
    for (int32_t k = 0; k < 20; ++k) r.prompt_ids.push_back(1000 + 97 * k + static_cast<int32_t>(i));
    r.max_tokens = 24;
    reqs.push_back(r);
  }
  const double before = metric(*srv, "num_preemptions_total");  // requests alone fit the pool
  together_equals_alone(cl, reqs);
  BOOST_TEST(metric(*srv, "num_preemptions_total") > before);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// The server gives what the generator (`troupe generate`) gives for the same structured request:
// the request builder's grammar, stop ids and end ids are the ones the generator is handed here.
BOOST_AUTO_TEST_CASE(served_equals_generated) {
  using kind = wire::structured_output::kind;
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  static const tokenizer tok(tokenizer_dir);
  const auto table = grammar::token_table::from_tokenizer(tok);
  static const auto ck = load_checkpoint(full_vocab_dir);
  for (const auto& spec : {of(kind::regex, "[a-z]{2,6}( [a-z]{2,6}){0,3}"), of(kind::json_object, ""),
                           of(kind::choice, "", {"alpha", "beta", "gamma delta"})})
    for (uint64_t seed : {5u, 6u}) {
      auto r = structured("gen-" + std::to_string(seed), spec, 0.9, seed);
      r.kind = wire::prompt_kind::ids;
      r.prompt_ids = tok.encode("Write something:");
      r.max_tokens = 20;
      generate_options o;
      o.max_tokens = 20;
      o.sampling = defaults_from(ck->generation);
      o.sampling.temperature = 0.9f;
      o.sampling.seed = seed;
      o.sampling.has_seed = true;
      o.sampling.grammar_end_ids = o.sampling.stop_token_ids;
      o.sampling.grammar = std::make_shared<grammar::automaton>(
          std::make_shared<const grammar::grammar>(grammar::parse_gbnf(serve::structured_output_gbnf(spec))), table);
      generator gen(*ck);
      const auto want = gen.generate(r.prompt_ids, o).ids;
      BOOST_TEST(cl.complete(r).ids == want, boost::test_tools::per_element());
    }
}

BOOST_AUTO_TEST_CASE(bad_specs_are_refused_naming_the_problem) {
  using kind = wire::structured_output::kind;
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  const std::vector<std::pair<wire::structured_output, std::string>> cases = {
      {of(kind::json_schema, R"({"type": "object", "not": {}})"), "unsupported keyword 'not'"},
      {of(kind::regex, "(a"), "regex: "},
      {of(kind::regex, "a(?=b)"), "regex: "},
      {of(kind::grammar, "root ::= x"), "grammar: line 1, column 10: rule 'x' is used but never defined"},
      {of(kind::grammar, "root ::= root \"a\""), "can recurse without consuming input"},
  };
  for (const auto& [s, want] : cases) {
    BOOST_CHECK_EXCEPTION(cl.complete(structured("bad", s, 0.0, 1)), client::request_error,
                          [&](const client::request_error& e) {
                            const std::string what = e.what();
                            BOOST_TEST_MESSAGE(what);
                            return what.find("structured output: ") != std::string::npos && what.find(want) != std::string::npos;
                          });
  }
  // ignore_eos leaves no stop id to end a complete grammar.
  auto r = structured("no-end", of(kind::choice, "", {"a"}), 0.0, 1);
  r.ignore_eos = true;
  BOOST_CHECK_EXCEPTION(cl.complete(r), client::request_error, [](const client::request_error& e) {
    return std::string(e.what()).find("ignore_eos") != std::string::npos;
  });
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_SUITE_END()
