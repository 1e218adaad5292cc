// Request decoding: golden bytes of the client encoder, a round trip of every request kind, and
// one test per kind of bad input, each asserting the error code and what the message names.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "runtime/wire/request_codec.hpp"
#include "tests/runtime/wire/msgpack_builder.hpp"

using namespace troupe::wire;
using test::array;
using test::map;
using test::raw;
using test::value;

namespace {

decoded_request decode(const value& v) { return decode_request(test::pack(v)); }

// A valid generate request with `extra` fields appended (or replacing none: duplicates are bad).
map generate_with(map extra) {
  map m{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt_ids", array{1, 2, 3}}};
  for (auto& e : extra) m.push_back(std::move(e));
  return m;
}

void expect_error(const decoded_request& d, error_code code, const std::string& needle,
                  const std::string& id = "") {
  BOOST_REQUIRE_MESSAGE(!d.ok(), "expected error " << to_string(code) << ", decoding succeeded");
  BOOST_TEST(to_string(d.error.code) == to_string(code));
  BOOST_TEST_MESSAGE(d.error.message);
  BOOST_TEST(d.error.message.find(needle) != std::string::npos,
             "message '" << d.error.message << "' should contain '" << needle << "'");
  BOOST_TEST(d.error.id == id);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(request_codec)

BOOST_AUTO_TEST_CASE(golden_bytes_of_a_generate_request) {
  generate_request g;
  g.id = "a";
  g.kind = prompt_kind::ids;
  g.prompt_ids = {1, 2};
  g.max_tokens = 4;
  auto bytes = encode_request(g);
  // fixmap(5) "v":1 "type":"generate" "id":"a" "prompt_ids":[1,2] "max_tokens":4
  std::string expected =
      "\x85"
      "\xa1v\x01"
      "\xa4type\xa8generate"
      "\xa2id\xa1" "a"
      "\xaaprompt_ids\x92\x01\x02"
      "\xaamax_tokens\x04";
  BOOST_TEST(test::hex(bytes) == test::hex(expected));
}

BOOST_AUTO_TEST_CASE(golden_bytes_of_cancel_and_health) {
  BOOST_TEST(test::hex(encode_request(cancel_request{"x"})) ==
             test::hex("\x83\xa1v\x01\xa4type\xa6" "cancel\xa2id\xa1x"));
  BOOST_TEST(test::hex(encode_request(health_request{})) ==
             test::hex("\x82\xa1v\x01\xa4type\xa6health"));
}

// Beam search's two fields round-trip; what does not apply to beams is refused naming the field.
BOOST_AUTO_TEST_CASE(beam_search_fields_round_trip_and_refuse_sampling_shapes) {
  generate_request g;
  g.id = "b";
  g.kind = prompt_kind::ids;
  g.prompt_ids = {5, 6};
  g.n = 4;
  g.use_beam_search = true;
  g.length_penalty = 0.5;
  auto d = decode_request(encode_request(g));
  BOOST_TEST_REQUIRE(d.ok(), d.error.message);
  BOOST_TEST((std::get<generate_request>(*d.req) == g));
  expect_error(decode(generate_with({{"use_beam_search", true}, {"n", 11}})), error_code::invalid_value,
               "field 'n' is the beam width with 'use_beam_search': at most 10", "r1");
  expect_error(decode(generate_with({{"use_beam_search", true}, {"logprobs", 2}})), error_code::invalid_value,
               "field 'logprobs' does not apply to 'use_beam_search'", "r1");
  expect_error(decode(generate_with({{"use_beam_search", true}, {"bad_words", array{"x"}}})),
               error_code::invalid_value, "field 'bad_words' does not apply", "r1");
  expect_error(decode(generate_with({{"use_beam_search", 1}})), error_code::wrong_type, "'use_beam_search'", "r1");
  expect_error(decode(generate_with({{"length_penalty", 11.0}})), error_code::invalid_value, "'length_penalty'", "r1");
}

BOOST_AUTO_TEST_CASE(every_generate_field_round_trips) {
  generate_request g;
  g.id = "req-7";
  g.kind = prompt_kind::messages;
  g.messages = {{"system", "Be brief.", "", ""}, {"user", "Hi \xe4\xbd\xa0", "", ""},
                {"assistant", "Hello", "thought", ""}, {"user", "More", "", ""}};
  g.enable_thinking = false;
  g.add_generation_prompt = false;
  g.continue_final_message = true;
  g.truncate_messages = true;
  g.thinking_token_budget = 512;
  g.template_kwargs_json = R"({"style":"terse","depth":2})";
  g.chat_template = "{{ messages[0].content }}";
  g.sampling.temperature = 0.7;
  g.sampling.top_p = 0.9;
  g.sampling.top_k = 20;
  g.sampling.min_p = 0.05;
  g.sampling.repetition_penalty = 1.1;
  g.sampling.presence_penalty = -0.5;
  g.sampling.frequency_penalty = 1.5;
  g.sampling.seed = 18446744073709551615ull;
  g.max_tokens = 100;
  g.stop = {"\n\n", "END"};
  g.stop_ids = {151645, 7};
  g.ignore_eos = true;
  g.return_prompt_ids = true;
  g.stream = false;
  g.priority = -3;
  g.tenant = "team-a";
  g.adapter = "sql-lora";
  g.deadline_ms = 2500;
  g.logprobs = 3;
  g.separate_reasoning = true;
  g.min_tokens = 4;
  g.bad_words = {"Paris", " hello world"};
  g.prompt_logprobs = 0;
  g.allowed_token_ids = {5, 9, 151645};
  g.logit_bias = {{151645, -100.0}, {7, 2.5}};
  g.n = 4;
  g.include_stop_str_in_output = true;
  g.skip_special_tokens = false;
  g.truncate_prompt_tokens = 100;
  g.cache_salt = "tenant-a salt";
  auto d = decode_request(encode_request(g));
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  BOOST_TEST((std::get<generate_request>(*d.req) == g));
}

BOOST_AUTO_TEST_CASE(text_prompt_defaults) {
  auto d = decode(map{{"v", 1}, {"type", "generate"}, {"id", "q"}, {"prompt", "Hello"}});
  BOOST_REQUIRE(d.ok());
  const auto& g = std::get<generate_request>(*d.req);
  BOOST_TEST((g.kind == prompt_kind::text));
  BOOST_TEST(g.prompt == "Hello");
  BOOST_TEST(g.stream);
  BOOST_TEST(!g.max_tokens.has_value());
  BOOST_TEST(!g.sampling.temperature.has_value());
  BOOST_TEST(g.priority == 0);
}

BOOST_AUTO_TEST_CASE(other_kinds_round_trip) {
  tokenize_request t;
  t.id = "t1";
  t.kind = prompt_kind::messages;
  t.messages = {{"user", "hi", "", ""}};
  t.enable_thinking = true;
  t.add_generation_prompt = false;
  for (const request& r : std::vector<request>{cancel_request{"r9"}, t, health_request{"h"},
                                               models_request{}, models_request{"m"}}) {
    auto d = decode_request(encode_request(r));
    BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
    BOOST_TEST(d.req->index() == r.index());
    BOOST_TEST(request_id(*d.req) == request_id(r));
    if (const auto* tr = std::get_if<tokenize_request>(&r)) BOOST_TEST((std::get<tokenize_request>(*d.req) == *tr));
  }
}

// The embed op: each form of `input` (a text, texts, token ids, arrays of ids) decodes into a
// generate_request with embed fields and n = the inputs, and encodes back to the same request.
// A batch of prompts (`prompts`: texts or arrays of ids, element by element): the request runs
// n completions of each, encodes back to the same request, and each malformed prompt is named.
BOOST_AUTO_TEST_CASE(a_batch_of_prompts_decodes_round_trips_and_names_what_is_wrong) {
  auto d = decode(map{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompts", array{"hello", array{5, 6}, "x"}}, {"n", 2},
                      {"temperature", 0}});
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  const auto& g = std::get<generate_request>(*d.req);
  BOOST_REQUIRE_EQUAL(g.prompts.size(), 3u);
  BOOST_TEST((g.prompts[0].kind == prompt_kind::text));
  BOOST_TEST(g.prompts[0].text == "hello");
  BOOST_TEST((g.prompts[1].kind == prompt_kind::ids));
  BOOST_TEST(g.prompts[1].ids == (std::vector<int32_t>{5, 6}), boost::test_tools::per_element());
  BOOST_TEST(g.prompts[2].text == "x");
  BOOST_TEST(g.prompt.empty());
  BOOST_TEST(g.sequences() == 6);
  auto back = decode_request(encode_request(*d.req));
  BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
  BOOST_TEST((std::get<generate_request>(*back.req) == g));
  const auto gen = [](std::initializer_list<std::pair<const std::string, value>> extra) {
    map m{{"v", 1}, {"type", "generate"}, {"id", "b"}};
    for (const auto& [k, v] : extra) m.emplace_back(k, v);
    return decode(m);
  };
  expect_error(gen({{"prompts", array{"a"}}, {"prompt", "a"}}), error_code::invalid_value, "'prompts'", "b");
  expect_error(gen({{"prompts", array{"a"}}, {"enable_thinking", true}}), error_code::invalid_value,
               "'enable_thinking' applies only to 'messages'", "b");
  expect_error(gen({{"prompts", array{}}}), error_code::invalid_value, "'prompts'", "b");
  expect_error(gen({{"prompts", "a"}}), error_code::wrong_type, "'prompts'", "b");
  expect_error(gen({{"prompts", array{"a", 3}}}), error_code::wrong_type, "'prompts[1]' must be a text or an array of token ids", "b");
  expect_error(gen({{"prompts", array{"a", ""}}}), error_code::invalid_value, "'prompts[1]' must not be empty", "b");
  expect_error(gen({{"prompts", array{"a", array{}}}}), error_code::invalid_value, "'prompts[1]'", "b");
  expect_error(gen({{"prompts", array{"a", array{-1}}}}), error_code::invalid_value, "'prompts[1]", "b");
  expect_error(gen({{"prompts", array{"a", "b", "c"}}, {"n", 43}}), error_code::invalid_value,
               "'prompts' (3) times 'n' (43) asks for more than 128 completions", "b");
}

// truncate_prompt_tokens (vLLM's) on generate and embed: -1 or a positive count, round-tripped.
BOOST_AUTO_TEST_CASE(truncate_prompt_tokens_decodes_and_round_trips) {
  for (const char* type : {"generate", "embed"}) {
    BOOST_TEST_CONTEXT(type) {
      for (int k : {-1, 7}) {
        map m{{"v", 1}, {"type", type}, {"id", "t"}, {"truncate_prompt_tokens", k}};
        m.emplace_back(value(std::string(type) == "embed" ? "input" : "prompt_ids"), value(array{1, 2, 3}));
        auto d = decode(m);
        BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
        const auto& g = std::get<generate_request>(*d.req);
        BOOST_TEST(g.truncate_prompt_tokens.value() == k);
        auto back = decode_request(encode_request(*d.req));
        BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
        BOOST_TEST((std::get<generate_request>(*back.req) == g));
      }
      for (int k : {0, -2}) {
        map m{{"v", 1}, {"type", type}, {"id", "t"}, {"truncate_prompt_tokens", k}};
        m.emplace_back(value(std::string(type) == "embed" ? "input" : "prompt_ids"), value(array{1}));
        expect_error(decode(m), error_code::invalid_value, "'truncate_prompt_tokens'", "t");
      }
    }
  }
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "t"}, {"query", "q"}, {"documents", array{"a"}},
                          {"truncate_prompt_tokens", 3}}),
               error_code::unknown_field, "'truncate_prompt_tokens'", "t");
}

BOOST_AUTO_TEST_CASE(embed_requests_decode_every_input_form_and_round_trip) {
  auto single = decode(map{{"v", 1}, {"type", "embed"}, {"id", "e1"}, {"input", "hello"}});
  BOOST_REQUIRE_MESSAGE(single.ok(), single.error.message);
  const auto& g = std::get<generate_request>(*single.req);
  BOOST_REQUIRE(g.embed.has_value());
  BOOST_TEST(g.embed->texts == std::vector<std::string>{"hello"}, boost::test_tools::per_element());
  BOOST_TEST(g.n == 1);
  BOOST_TEST(!g.stream);
  BOOST_TEST(g.embed->normalize);
  BOOST_TEST(request_type(*single.req) == "embed");
  auto texts = decode(map{{"v", 1}, {"type", "embed"}, {"id", "e2"}, {"input", array{"a", "b", "c"}},
                          {"dimensions", 64}, {"normalize", false}, {"priority", -1}});
  BOOST_REQUIRE_MESSAGE(texts.ok(), texts.error.message);
  const auto& t = std::get<generate_request>(*texts.req);
  BOOST_TEST(t.n == 3);
  BOOST_TEST(t.embed->dimensions.value() == 64);
  BOOST_TEST(!t.embed->normalize);
  BOOST_TEST(t.priority == -1);
  auto ids = decode(map{{"v", 1}, {"type", "embed"}, {"id", "e3"}, {"input", array{5, 6, 7}}});
  BOOST_REQUIRE_MESSAGE(ids.ok(), ids.error.message);
  BOOST_TEST((std::get<generate_request>(*ids.req).embed->ids == std::vector<std::vector<int32_t>>{{5, 6, 7}}));
  auto lists = decode(map{{"v", 1}, {"type", "embed"}, {"id", "e4"}, {"input", array{array{5}, array{6, 7}}}});
  BOOST_REQUIRE_MESSAGE(lists.ok(), lists.error.message);
  const auto& l = std::get<generate_request>(*lists.req);
  BOOST_TEST(l.n == 2);
  BOOST_TEST((l.embed->ids == std::vector<std::vector<int32_t>>{{5}, {6, 7}}));
  for (const auto* d : {&single, &texts, &ids, &lists}) {
    const auto& req = std::get<generate_request>(*d->req);
    auto back = decode_request(encode_request(*d->req));
    BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
    BOOST_TEST((std::get<generate_request>(*back.req) == req));
  }
}

BOOST_AUTO_TEST_CASE(bad_embed_requests_name_what_is_wrong) {
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}}), error_code::missing_field, "'input'", "e");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", "x"}, {"max_tokens", 3}}),
               error_code::unknown_field, "'max_tokens'", "e");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", ""}}), error_code::invalid_value,
               "'input' must not be empty", "e");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", array{}}}), error_code::invalid_value,
               "'input'", "e");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", array{array{1}, array{-2}}}}),
               error_code::invalid_value, "input[1][0]", "e");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", "x"}, {"dimensions", 0}}),
               error_code::invalid_value, "'dimensions'", "e");
  array many;
  for (int i = 0; i < 129; ++i) many.push_back("x");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "e"}, {"input", many}}), error_code::invalid_value,
               "129 elements", "e");
}

// task "classify" (vLLM's pooling task): the same inputs, label probabilities instead of an
// embedding; round-trips, and the embedding-only fields and other tasks are refused by name.
BOOST_AUTO_TEST_CASE(classify_is_an_embed_task) {
  auto c = decode(map{{"v", 1}, {"type", "embed"}, {"id", "c1"}, {"input", array{"a", "b"}}, {"task", "classify"}});
  BOOST_REQUIRE_MESSAGE(c.ok(), c.error.message);
  const auto& g = std::get<generate_request>(*c.req);
  BOOST_TEST(g.embed->classify);
  BOOST_TEST(g.n == 2);
  auto back = decode_request(encode_request(*c.req));
  BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
  BOOST_TEST((std::get<generate_request>(*back.req) == g));
  auto e = decode(map{{"v", 1}, {"type", "embed"}, {"id", "c2"}, {"input", "a"}, {"task", "embed"}});
  BOOST_REQUIRE_MESSAGE(e.ok(), e.error.message);
  BOOST_TEST(!std::get<generate_request>(*e.req).embed->classify);
  BOOST_TEST(encode_request(*e.req).find("task") == std::string::npos);
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "c"}, {"input", "a"}, {"task", "score"}}),
               error_code::invalid_value, "field 'task' = 'score'; expected embed or classify", "c");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "c"}, {"input", "a"}, {"task", "classify"}, {"dimensions", 8}}),
               error_code::invalid_value, "field 'dimensions' shapes an embedding", "c");
  expect_error(decode(map{{"v", 1}, {"type", "embed"}, {"id", "c"}, {"input", "a"}, {"task", "classify"}, {"normalize", false}}),
               error_code::invalid_value, "field 'normalize' shapes an embedding", "c");
}

// The rerank op: a query and documents decode into a generate_request with rerank fields and n =
// the documents, and encode back to the same request; each malformed field is named.
BOOST_AUTO_TEST_CASE(rerank_requests_decode_round_trip_and_name_what_is_wrong) {
  auto plain = decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k1"}, {"query", "q"}, {"documents", array{"a", "b", "c"}}});
  BOOST_REQUIRE_MESSAGE(plain.ok(), plain.error.message);
  const auto& g = std::get<generate_request>(*plain.req);
  BOOST_REQUIRE(g.rerank.has_value());
  BOOST_TEST(g.rerank->queries == std::vector<std::string>{"q"});
  BOOST_TEST(g.rerank->documents == (std::vector<std::string>{"a", "b", "c"}), boost::test_tools::per_element());
  BOOST_TEST(!g.rerank->instruction.has_value());
  BOOST_TEST(g.n == 3);
  BOOST_TEST(!g.stream);
  BOOST_TEST(request_type(*plain.req) == "rerank");
  auto full = decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k2"}, {"query", "q"}, {"documents", array{"d"}},
                         {"instruction", "find code"}, {"priority", 2}, {"tenant", "t"}, {"deadline_ms", 500}});
  BOOST_REQUIRE_MESSAGE(full.ok(), full.error.message);
  const auto& f = std::get<generate_request>(*full.req);
  BOOST_TEST(f.rerank->instruction.value() == "find code");
  BOOST_TEST(f.priority == 2);
  BOOST_TEST(f.tenant == "t");
  BOOST_TEST(f.deadline_ms.value() == 500u);
  // One query per document (vLLM's pairwise /v1/score).
  auto pairs = decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k3"}, {"queries", array{"q1", "q2"}}, {"documents", array{"a", "b"}}});
  BOOST_REQUIRE_MESSAGE(pairs.ok(), pairs.error.message);
  const auto& p = std::get<generate_request>(*pairs.req);
  BOOST_TEST(p.rerank->queries == (std::vector<std::string>{"q1", "q2"}), boost::test_tools::per_element());
  BOOST_TEST(p.rerank->query_for(0) == "q1");
  BOOST_TEST(p.rerank->query_for(1) == "q2");
  BOOST_TEST(g.rerank->query_for(2) == "q");
  BOOST_TEST(p.n == 2);
  for (const auto* d : {&plain, &full, &pairs}) {
    auto back = decode_request(encode_request(*d->req));
    BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
    BOOST_TEST((std::get<generate_request>(*back.req) == std::get<generate_request>(*d->req)));
  }
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"documents", array{"a"}}}), error_code::missing_field,
               "'query'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}}), error_code::missing_field,
               "'documents'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}, {"queries", array{"q"}}, {"documents", array{"a"}}}),
               error_code::invalid_value, "'query' or 'queries', not both", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"queries", array{"q"}}, {"documents", array{"a", "b"}}}),
               error_code::invalid_value, "'queries' needs one text per document (2), not 1", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"queries", array{"q", ""}}, {"documents", array{"a", "b"}}}),
               error_code::invalid_value, "'queries[1]' must not be empty", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"queries", "q"}, {"documents", array{"a"}}}),
               error_code::wrong_type, "'queries'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", ""}, {"documents", array{"a"}}}),
               error_code::invalid_value, "'query' must not be empty", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}, {"documents", array{"a", ""}}}),
               error_code::invalid_value, "'documents[1]' must not be empty", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}, {"documents", "a"}}),
               error_code::wrong_type, "'documents'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}, {"documents", array{"a"}}, {"top_n", 1}}),
               error_code::unknown_field, "'top_n'", "k");
  array many;
  for (int i = 0; i < 129; ++i) many.push_back("x");
  expect_error(decode(map{{"v", 1}, {"type", "rerank"}, {"id", "k"}, {"query", "q"}, {"documents", many}}),
               error_code::invalid_value, "129 elements", "k");
}

BOOST_AUTO_TEST_CASE(integers_are_accepted_where_numbers_are_expected) {
  auto d = decode(generate_with({{"temperature", 0}, {"top_p", 1}}));
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(*std::get<generate_request>(*d.req).sampling.temperature == 0.0);
}

// ---- bad input: one test each ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(empty_frame) { expect_error(decode_request(""), error_code::malformed, "empty frame"); }

BOOST_AUTO_TEST_CASE(not_msgpack) {
  expect_error(decode_request("\xc1"), error_code::malformed, "not valid msgpack");
}

BOOST_AUTO_TEST_CASE(truncated_msgpack) {
  auto bytes = test::pack(generate_with({}));
  expect_error(decode_request(bytes.substr(0, bytes.size() - 2)), error_code::malformed, "truncated");
}

BOOST_AUTO_TEST_CASE(trailing_bytes) {
  expect_error(decode_request(test::pack(generate_with({})) + "\x01"), error_code::malformed,
               "1 trailing bytes");
}

BOOST_AUTO_TEST_CASE(not_a_map) {
  expect_error(decode(array{1, 2}), error_code::malformed, "must be a msgpack map; got array");
}

BOOST_AUTO_TEST_CASE(non_string_key) {
  expect_error(decode(map{{"v", 1}, {7, "x"}}), error_code::malformed, "keys must be strings");
}

BOOST_AUTO_TEST_CASE(duplicate_key) {
  expect_error(decode(generate_with({{"id", "r2"}})), error_code::malformed,
               "field 'id' appears twice");
}

BOOST_AUTO_TEST_CASE(container_bomb_is_refused_without_allocating) {
  // An array header declaring 2^32-1 elements in a 6-byte frame.
  expect_error(decode_request(std::string("\xdd\xff\xff\xff\xff\x00", 6)), error_code::malformed,
               "not valid msgpack");
  // Deep nesting.
  expect_error(decode_request(std::string(64, '\x91') + "\x01"), error_code::malformed,
               "not valid msgpack");
}

BOOST_AUTO_TEST_CASE(missing_version) {
  expect_error(decode(map{{"type", "health"}}), error_code::missing_field, "missing field 'v'");
}

BOOST_AUTO_TEST_CASE(version_of_wrong_type) {
  expect_error(decode(map{{"v", "1"}, {"type", "health"}}), error_code::wrong_type,
               "field 'v' must be an integer; got string");
}

BOOST_AUTO_TEST_CASE(newer_version_hears_about_the_version_first) {
  // A v2 client with a field v1 does not know: the answer is about the version.
  expect_error(decode(map{{"v", 2}, {"type", "generate"}, {"id", "n"}, {"future", true}}),
               error_code::unsupported_version,
               "protocol version 2 is not supported; this server speaks version 1", "n");
}

BOOST_AUTO_TEST_CASE(missing_type) {
  expect_error(decode(map{{"v", 1}, {"id", "z"}}), error_code::missing_field, "'type'", "z");
}

BOOST_AUTO_TEST_CASE(unknown_request_kind) {
  expect_error(decode(map{{"v", 1}, {"type", "generat"}, {"id", "z"}}), error_code::unknown_type,
               "unknown request type 'generat'", "z");
}

BOOST_AUTO_TEST_CASE(unknown_field_is_named) {
  expect_error(decode(generate_with({{"temprature", 0.5}})), error_code::unknown_field,
               "unknown field 'temprature' in a generate request", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "cancel"}, {"id", "c"}, {"reason", "x"}}),
               error_code::unknown_field, "unknown field 'reason' in a cancel request", "c");
}

BOOST_AUTO_TEST_CASE(unknown_field_inside_a_message_is_named) {
  auto m = map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
               {"messages", array{map{{"role", "user"}, {"content", "hi"}, {"name", "bob"}}}}};
  expect_error(decode(m), error_code::unknown_field, "unknown field 'name' in a chat message (messages[0])",
               "r1");
}

BOOST_AUTO_TEST_CASE(wrong_types_are_named) {
  expect_error(decode(generate_with({{"max_tokens", "10"}})), error_code::wrong_type,
               "field 'max_tokens' must be an integer; got string", "r1");
  expect_error(decode(generate_with({{"max_tokens", 10.0}})), error_code::wrong_type,
               "field 'max_tokens' must be an integer; got float", "r1");
  expect_error(decode(generate_with({{"temperature", "hot"}})), error_code::wrong_type,
               "field 'temperature' must be a number; got string", "r1");
  expect_error(decode(generate_with({{"stream", 1}})), error_code::wrong_type,
               "field 'stream' must be a bool; got integer", "r1");
  expect_error(decode(generate_with({{"stop", "END"}})), error_code::wrong_type,
               "field 'stop' must be an array; got string", "r1");
  expect_error(decode(generate_with({{"include_stop_str_in_output", "yes"}})), error_code::wrong_type,
               "field 'include_stop_str_in_output'", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt_ids", array{1, 2.5}}}),
               error_code::wrong_type, "field 'prompt_ids[1]' must be an integer; got float", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", 5}, {"prompt", "x"}}),
               error_code::wrong_type, "field 'id' must be a string; got integer");
}

BOOST_AUTO_TEST_CASE(missing_required_fields) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"prompt", "x"}}), error_code::missing_field,
               "needs field 'id'");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}}), error_code::missing_field,
               "needs one of 'prompt', 'prompt_ids' or 'messages'", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "cancel"}}), error_code::missing_field, "needs field 'id'");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"messages", array{map{{"role", "user"}}}}}),
               error_code::missing_field, "messages[0] needs field 'content'", "r1");
}

BOOST_AUTO_TEST_CASE(two_prompts) {
  expect_error(decode(generate_with({{"prompt", "x"}})), error_code::invalid_value,
               "give only one of", "r1");
}

BOOST_AUTO_TEST_CASE(max_tokens_zero_or_negative) {
  expect_error(decode(generate_with({{"max_tokens", 0}})), error_code::invalid_value,
               "field 'max_tokens' = 0 is out of range; expected 1..", "r1");
  expect_error(decode(generate_with({{"max_tokens", -5}})), error_code::invalid_value,
               "field 'max_tokens' = -5 is out of range", "r1");
}

BOOST_AUTO_TEST_CASE(sampling_values_out_of_range) {
  struct c { const char* field; value v; const char* needle; };
  std::vector<c> cases = {
      {"temperature", -0.1, "field 'temperature' = -0.1 is out of range; expected [0, 100]"},
      {"temperature", std::numeric_limits<double>::quiet_NaN(), "field 'temperature' = nan"},
      {"top_p", 0, "field 'top_p' = 0 is out of range; expected (0, 1]"},
      {"top_p", 1.5, "field 'top_p' = 1.5"},
      {"top_k", -2, "field 'top_k' = -2 is out of range"},
      {"min_p", 2, "field 'min_p' = 2"},
      {"repetition_penalty", 0, "field 'repetition_penalty' = 0"},
      {"presence_penalty", 2.5, "field 'presence_penalty' = 2.5"},
      {"frequency_penalty", -3, "field 'frequency_penalty' = -3"},
      {"seed", -1, "field 'seed' = -1 must be >= 0"},
      {"deadline_ms", 0, "field 'deadline_ms' = 0"},
  };
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(k.field) {
      expect_error(decode(generate_with({{k.field, k.v}})), error_code::invalid_value, k.needle, "r1");
    }
  }
}

BOOST_AUTO_TEST_CASE(negative_prompt_id) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt_ids", array{3, -1}}}),
               error_code::invalid_value, "field 'prompt_ids[1]' = -1 is out of range", "r1");
}

BOOST_AUTO_TEST_CASE(empty_prompts) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt", ""}}),
               error_code::invalid_value, "'prompt' must not be empty", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt_ids", array{}}}),
               error_code::invalid_value, "'prompt_ids' has 0 elements", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"messages", array{}}}),
               error_code::invalid_value, "'messages' has 0 elements", "r1");
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_named) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"prompt", "ok \xff"}}),
               error_code::invalid_utf8, "field 'prompt' is not valid UTF-8 (byte 3)", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                          {"messages", array{map{{"role", "user"}, {"content", "\xed\xa0\x80"}}}}}),
               error_code::invalid_utf8, "field 'messages[0].content' is not valid UTF-8", "r1");
  expect_error(decode(generate_with({{"stop", array{"\xc0\xaf"}}})), error_code::invalid_utf8,
               "field 'stop[0]'", "r1");
  // An invalid id cannot be echoed back, so the error carries none.
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "\xff"}, {"prompt", "x"}}),
               error_code::invalid_utf8, "field 'id'");
}

BOOST_AUTO_TEST_CASE(bad_chat_role) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                          {"messages", array{map{{"role", "robot"}, {"content", "x"}}}}}),
               error_code::invalid_value, "'messages[0].role' = 'robot'", "r1");
}

BOOST_AUTO_TEST_CASE(enable_thinking_without_messages) {
  expect_error(decode(generate_with({{"enable_thinking", true}})), error_code::invalid_value,
               "'enable_thinking' applies only to 'messages'", "r1");
  expect_error(decode(generate_with({{"continue_final_message", true}})), error_code::invalid_value,
               "'continue_final_message' applies only to 'messages'", "r1");
  expect_error(decode(generate_with({{"add_generation_prompt", false}})), error_code::invalid_value,
               "'add_generation_prompt' applies only to 'messages'", "r1");
  expect_error(decode(generate_with({{"truncate_messages", true}})), error_code::invalid_value,
               "'truncate_messages' applies only to 'messages'", "r1");
  expect_error(decode(generate_with({{"chat_template_kwargs", map{{"a", 1}}}})), error_code::invalid_value,
               "'chat_template_kwargs' applies only to 'messages'", "r1");
  expect_error(decode(generate_with({{"chat_template", "{{ x }}"}})), error_code::invalid_value,
               "'chat_template' applies only to 'messages'", "r1");
}

// Assistant prefill: continue_final_message needs the generation prompt off, as vLLM's rule.
BOOST_AUTO_TEST_CASE(continue_final_message_needs_the_generation_prompt_off) {
  const array msgs{map{{"role", "user"}, {"content", "x"}}, map{{"role", "assistant"}, {"content", "y"}}};
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "c"}, {"messages", msgs}, {"continue_final_message", true}}),
               error_code::invalid_value, "needs 'add_generation_prompt' false", "c");
  auto d = decode(map{{"v", 1}, {"type", "generate"}, {"id", "c"}, {"messages", msgs}, {"continue_final_message", true},
                      {"add_generation_prompt", false}});
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  BOOST_TEST(std::get<generate_request>(*d.req).continue_final_message);
  auto t = decode(map{{"v", 1}, {"type", "tokenize"}, {"messages", msgs}, {"add_generation_prompt", false}});
  BOOST_REQUIRE_MESSAGE(t.ok(), t.error.message);
  BOOST_TEST(!std::get<tokenize_request>(*t.req).add_generation_prompt);
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "c"}, {"messages", msgs}, {"add_generation_prompt", "no"}}),
               error_code::wrong_type, "'add_generation_prompt'", "c");
}

BOOST_AUTO_TEST_CASE(limits_on_ids_stop_and_tenant) {
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", std::string(129, 'a')}, {"prompt", "x"}}),
               error_code::invalid_value, "field 'id' has 129 bytes; at most 128");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", ""}, {"prompt", "x"}}),
               error_code::invalid_value, "field 'id' must not be empty");
  array many(17, value("s"));
  expect_error(decode(generate_with({{"stop", many}})), error_code::invalid_value,
               "field 'stop' has 17 elements; expected 0..16", "r1");
  expect_error(decode(generate_with({{"stop", array{""}}})), error_code::invalid_value,
               "'stop[0]' must not be empty", "r1");
  expect_error(decode(generate_with({{"tenant", std::string(200, 't')}})), error_code::invalid_value,
               "field 'tenant' has 200 bytes", "r1");
  expect_error(decode(generate_with({{"adapter", std::string(129, 'a')}})), error_code::invalid_value,
               "field 'adapter' has 129 bytes; at most 128", "r1");
  expect_error(decode(generate_with({{"adapter", 7}})), error_code::wrong_type, "'adapter'", "r1");
  expect_error(decode(generate_with({{"cache_salt", ""}})), error_code::invalid_value,
               "field 'cache_salt' must not be empty", "r1");
  expect_error(decode(generate_with({{"cache_salt", std::string(1025, 's')}})), error_code::invalid_value,
               "field 'cache_salt' has 1025 bytes; at most 1024", "r1");
  expect_error(decode(generate_with({{"cache_salt", 7}})), error_code::wrong_type, "'cache_salt'", "r1");
  expect_error(decode(generate_with({{"thinking_token_budget", -2}})), error_code::invalid_value,
               "'thinking_token_budget'", "r1");
  expect_error(decode(generate_with({{"thinking_token_budget", "x"}})), error_code::wrong_type,
               "'thinking_token_budget'", "r1");
}

// Tools and tool calls are free-form JSON: they arrive as JSON text with the client's key order
// (the chat template prints them as given), and go back out as the same msgpack.
BOOST_AUTO_TEST_CASE(tools_and_tool_calls_round_trip_as_json) {
  const map tool{{"type", "function"},
                 {"function", map{{"name", "get_weather"},
                                  {"parameters", map{{"type", "object"},
                                                     {"properties", map{{"city", map{{"type", "string"}}},
                                                                        {"days", map{{"type", "integer"}, {"maximum", 7}}},
                                                                        {"p", map{{"minimum", 0.5}}}}},
                                                     {"required", array{"city"}}}}}}};
  const map call{{"name", "get_weather"}, {"arguments", map{{"city", "Zürich"}, {"days", -2}, {"x", nullptr}}}};
  auto d = decode(map{{"v", 1}, {"type", "generate"}, {"id", "t1"},
                      {"messages", array{map{{"role", "user"}, {"content", "Weather?"}},
                                         map{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", array{call}}},
                                         map{{"role", "tool"}, {"content", "{\"temp\": 21}"}}}},
                      {"tools", array{tool}}});
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  const auto& g = std::get<generate_request>(*d.req);
  BOOST_TEST(g.tools_json ==
             R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":)"
             R"({"city":{"type":"string"},"days":{"type":"integer","maximum":7},"p":{"minimum":0.5}},"required":["city"]}}}])");
  BOOST_TEST(g.messages[1].tool_calls_json == R"([{"name":"get_weather","arguments":{"city":"Zürich","days":-2,"x":null}}])");
  BOOST_TEST(g.messages[1].content.empty());
  auto again = decode_request(encode_request(g));
  BOOST_REQUIRE(again.ok());
  BOOST_TEST((std::get<generate_request>(*again.req) == g));
  // tokenize takes tools too.
  auto t = decode(map{{"v", 1}, {"type", "tokenize"}, {"messages", array{map{{"role", "user"}, {"content", "x"}}}},
                      {"tools", array{tool}}});
  BOOST_REQUIRE(t.ok());
  BOOST_TEST(std::get<tokenize_request>(*t.req).tools_json == g.tools_json);
}

BOOST_AUTO_TEST_CASE(bad_tools_are_named) {
  const map user{{"role", "user"}, {"content", "x"}};
  auto chat = [&](map extra) {
    map m{{"v", 1}, {"type", "generate"}, {"id", "r1"}, {"messages", array{user}}};
    for (auto& e : extra) m.push_back(std::move(e));
    return decode(m);
  };
  expect_error(decode(generate_with({{"tools", array{map{}}}})), error_code::invalid_value,
               "'tools' applies only to 'messages'", "r1");
  expect_error(chat({{"tools", map{}}}), error_code::wrong_type, "field 'tools' must be an array", "r1");
  expect_error(chat({{"tools", array{}}}), error_code::invalid_value, "field 'tools' has 0 elements", "r1");
  expect_error(chat({{"tools", array{"get_weather"}}}), error_code::wrong_type, "field 'tools[0]' must be a map", "r1");
  expect_error(chat({{"tools", array{map{{"f", raw{"\xc4\x01" "A"}}}}}}), error_code::invalid_value,
               "field 'tools[0].f' is a binary value", "r1");
  expect_error(chat({{"tools", array{map{{"x", std::nan("")}}}}}), error_code::invalid_value,
               "'tools[0].x' is not a finite number", "r1");
  expect_error(chat({{"tools", array{map{{"a", map{{1, 2}}}}}}}), error_code::invalid_value,
               "field 'tools[0].a' has a key of type integer", "r1");
  expect_error(chat({{"tools", array{map{{"s", raw{"\xa2\xff\xfe"}}}}}}), error_code::invalid_value,
               "'tools[0].s' is not valid UTF-8", "r1");
  expect_error(chat({{"tools", array{map{{"f", map{{"a", 1}, {"b", 2}, {"a", 3}}}}}}}), error_code::invalid_value,
               "field 'tools[0].f' has key 'a' twice", "r1");
  // Nesting: 32 levels in all are allowed (room for JSON schemas), deeper is not msgpack we read.
  value deep = 1;
  for (int i = 0; i < 40; ++i) deep = array{deep};
  expect_error(chat({{"tools", array{map{{"d", deep}}}}}), error_code::malformed, "not valid msgpack");
  value ok = 1;
  for (int i = 0; i < 25; ++i) ok = array{ok};
  BOOST_TEST(chat({{"tools", array{map{{"d", ok}}}}}).ok());
  // tool_calls: assistant turns only, an array of maps; content may then be null or absent.
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                          {"messages", array{map{{"role", "user"}, {"content", "x"},
                                                 {"tool_calls", array{map{{"name", "f"}}}}}}}}),
               error_code::invalid_value, "'messages[0].tool_calls' belongs to assistant turns", "r1");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                          {"messages", array{map{{"role", "assistant"}, {"tool_calls", array{1}}}}}}),
               error_code::wrong_type, "'messages[0].tool_calls[0]' must be a map", "r1");
  BOOST_TEST(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                        {"messages", array{map{{"role", "assistant"}, {"tool_calls", array{map{{"name", "f"}}}}}}}})
                 .ok());
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "r1"},
                          {"messages", array{map{{"role", "assistant"}, {"content", nullptr}}}}}),
               error_code::wrong_type, "'messages[0].content' must be a string", "r1");
}

BOOST_AUTO_TEST_CASE(logprobs_field) {
  auto d = decode(generate_with({{"logprobs", 5}}));
  BOOST_REQUIRE(d.ok());
  const auto& g = std::get<generate_request>(*d.req);
  BOOST_TEST(g.logprobs.value_or(-1) == 5);
  BOOST_TEST((std::get<generate_request>(*decode_request(encode_request(g)).req) == g));
  BOOST_TEST(std::get<generate_request>(*decode(generate_with({{"logprobs", 0}})).req).logprobs.value_or(-1) == 0);
  expect_error(decode(generate_with({{"logprobs", 21}})), error_code::invalid_value, "field 'logprobs'", "r1");
  expect_error(decode(generate_with({{"logprobs", -1}})), error_code::invalid_value, "field 'logprobs'", "r1");
  expect_error(decode(generate_with({{"logprobs", true}})), error_code::wrong_type, "field 'logprobs'", "r1");
  BOOST_TEST(std::get<generate_request>(*decode(generate_with({{"prompt_logprobs", 20}})).req).prompt_logprobs.value_or(-1) == 20);
  expect_error(decode(generate_with({{"prompt_logprobs", 21}})), error_code::invalid_value, "field 'prompt_logprobs'", "r1");
}

BOOST_AUTO_TEST_CASE(n_field) {
  BOOST_TEST(std::get<generate_request>(*decode(generate_with({})).req).n == 1);
  BOOST_TEST(std::get<generate_request>(*decode(generate_with({{"n", 128}})).req).n == 128);
  expect_error(decode(generate_with({{"n", 0}})), error_code::invalid_value, "field 'n'", "r1");
  expect_error(decode(generate_with({{"n", 129}})), error_code::invalid_value, "field 'n'", "r1");
  expect_error(decode(generate_with({{"n", 2.0}})), error_code::wrong_type, "field 'n'", "r1");
  generate_request one;
  one.id = "a";
  one.prompt = "x";
  BOOST_TEST(encode_request(one).find("\xa1n") == std::string::npos);  // the default stays off the wire
}

BOOST_AUTO_TEST_CASE(separate_reasoning_field) {
  auto d = decode(generate_with({{"separate_reasoning", true}}));
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(std::get<generate_request>(*d.req).separate_reasoning);
  BOOST_TEST(!std::get<generate_request>(*decode(generate_with({{"separate_reasoning", false}})).req).separate_reasoning);
  expect_error(decode(generate_with({{"separate_reasoning", 1}})), error_code::wrong_type, "field 'separate_reasoning'", "r1");
}

// OpenAI's logit_bias: a map of token id (a decimal string in JSON, or an integer key) to a bias.
BOOST_AUTO_TEST_CASE(token_rules_fields) {
  auto d = decode(generate_with({{"min_tokens", 3},
                                 {"allowed_token_ids", array{4, 8}},
                                 {"logit_bias", map{{"50256", -100}, {7, 0.5}, {"12", 100.0}}}}));
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  const auto& g = std::get<generate_request>(*d.req);
  BOOST_TEST(g.min_tokens.value_or(-1) == 3);
  BOOST_TEST((g.allowed_token_ids == std::vector<int32_t>{4, 8}));
  BOOST_TEST((g.logit_bias == std::vector<std::pair<int32_t, double>>{{50256, -100.0}, {7, 0.5}, {12, 100.0}}));
  expect_error(decode(generate_with({{"min_tokens", -1}})), error_code::invalid_value, "field 'min_tokens'", "r1");
  expect_error(decode(generate_with({{"allowed_token_ids", array{}}})), error_code::invalid_value,
               "field 'allowed_token_ids' has 0 elements", "r1");
  expect_error(decode(generate_with({{"allowed_token_ids", array{1, -2}}})), error_code::invalid_value,
               "field 'allowed_token_ids[1]'", "r1");
  expect_error(decode(generate_with({{"logit_bias", array{1}}})), error_code::wrong_type, "field 'logit_bias'", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"12", 100.5}}}})), error_code::invalid_value,
               "field 'logit_bias[\"12\"]' = 100.5 is out of range", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"abc", 1}}}})), error_code::invalid_value,
               "key 'abc', which is not a token id", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"-5", 1}}}})), error_code::invalid_value, "key '-5'", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"99999999999", 1}}}})), error_code::invalid_value,
               "key '99999999999'", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"5", 1}, {5, 2}}}})), error_code::invalid_value,
               "names token 5 twice", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{true, 1}}}})), error_code::wrong_type, "logit_bias key", "r1");
  expect_error(decode(generate_with({{"logit_bias", map{{"5", "x"}}}})), error_code::wrong_type, "logit_bias[\"5\"]", "r1");
  expect_error(decode(generate_with({{"bad_words", array{"ok", " \n "}}})), error_code::invalid_value,
               "field 'bad_words[1]' must hold a word", "r1");
  expect_error(decode(generate_with({{"bad_words", array{}}})), error_code::invalid_value, "field 'bad_words' has 0", "r1");
  expect_error(decode(generate_with({{"bad_words", array{"ok", ""}}})), error_code::invalid_value,
               "field 'bad_words[1]' must not be empty", "r1");
  expect_error(decode(generate_with({{"bad_words", array{1}}})), error_code::wrong_type, "field 'bad_words[0]'", "r1");
}

// Structured output: OpenAI's response_format and vLLM's structured_outputs decode to one value,
// which the encoder writes as structured_outputs (a round trip); every misuse is named.
BOOST_AUTO_TEST_CASE(structured_output_fields) {
  using kind = structured_output::kind;
  auto get = [](map extra) {
    auto d = decode(generate_with(std::move(extra)));
    BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
    return std::get<generate_request>(*d.req);
  };
  const map schema{{"type", "object"}, {"properties", map{{"b", map{{"type", "integer"}}}, {"a", map{{"type", "string"}}}}}};
  const std::string schema_text = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})";
  auto g = get({{"response_format", map{{"type", "json_schema"},
                                          {"json_schema", map{{"name", "x"}, {"strict", true}, {"schema", schema}}}}}});
  BOOST_TEST((g.structured.k == kind::json_schema));
  BOOST_TEST(g.structured.spec == schema_text);  // key order kept
  BOOST_TEST((get({{"structured_outputs", map{{"json", schema}}}}).structured == g.structured));
  BOOST_TEST((get({{"structured_outputs", map{{"json", schema_text}}}}).structured == g.structured));
  // JSON text in any layout is the same schema (and round-trips like the map form).
  const std::string spaced = " {\n \"type\" : \"object\", \"properties\": {\"b\": {\"type\": \"integer\"},\n\"a\":{\"type\":\"string\"}}} ";
  BOOST_TEST((get({{"structured_outputs", map{{"json", spaced}}}}).structured == g.structured));
  BOOST_TEST((get({{"response_format", map{{"type", "json_object"}}}}).structured.k == kind::json_object));
  BOOST_TEST((get({{"structured_outputs", map{{"json_object", true}}}}).structured.k == kind::json_object));
  BOOST_TEST((get({{"response_format", map{{"type", "text"}}}}).structured.k == kind::none));
  auto re = get({{"structured_outputs", map{{"regex", "[a-z]+"}}}});
  BOOST_TEST((re.structured.k == kind::regex && re.structured.spec == "[a-z]+"));
  auto ch = get({{"structured_outputs", map{{"choice", array{"yes", "no"}}}}});
  BOOST_TEST((ch.structured.k == kind::choice && ch.structured.choices == std::vector<std::string>{"yes", "no"}));
  auto gr = get({{"structured_outputs", map{{"grammar", "root ::= \"a\""}}}});
  BOOST_TEST((gr.structured.k == kind::grammar && gr.structured.spec == "root ::= \"a\""));
  for (const generate_request& r : {g, re, ch, gr}) {
    auto back = decode_request(encode_request(request{r}));
    BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
    BOOST_TEST((std::get<generate_request>(*back.req).structured == r.structured));
  }

  const std::vector<std::tuple<map, error_code, std::string>> bad = {
      {{{"response_format", "json"}}, error_code::wrong_type, "field 'response_format'"},
      {{{"response_format", map{{"type", "yaml"}}}}, error_code::invalid_value, "'response_format.type' = 'yaml'"},
      {{{"response_format", map{}}}, error_code::missing_field, "needs 'type'"},
      {{{"response_format", map{{"type", "json_schema"}}}}, error_code::missing_field, "needs field 'json_schema'"},
      {{{"response_format", map{{"type", "json_schema"}, {"json_schema", map{{"name", "x"}}}}}}, error_code::missing_field,
       "needs 'schema'"},
      {{{"response_format", map{{"type", "json_schema"}, {"json_schema", map{{"schema", schema}, {"scheme", 1}}}}}},
       error_code::unknown_field, "scheme"},
      {{{"response_format", map{{"type", "json_object"}, {"json_schema", map{}}}}}, error_code::invalid_value,
       "belongs to type 'json_schema'"},
      {{{"response_format", map{{"type", "json_schema"}, {"json_schema", map{{"schema", 3}}}}}}, error_code::wrong_type,
       "response_format.json_schema.schema"},
      {{{"structured_outputs", map{}}}, error_code::invalid_value, "exactly one of"},
      {{{"structured_outputs", map{{"regex", "a"}, {"choice", array{"a"}}}}}, error_code::invalid_value, "exactly one of"},
      {{{"structured_outputs", map{{"regexp", "a"}}}}, error_code::unknown_field, "regexp"},
      {{{"structured_outputs", map{{"json", "{not json"}}}}, error_code::invalid_value, "'structured_outputs.json' is not JSON"},
      {{{"structured_outputs", map{{"regex", ""}}}}, error_code::invalid_value, "must not be empty"},
      {{{"structured_outputs", map{{"json", "[1]"}}}}, error_code::wrong_type, "structured_outputs.json"},
      {{{"structured_outputs", map{{"choice", array{}}}}}, error_code::invalid_value, "structured_outputs.choice"},
      {{{"structured_outputs", map{{"choice", array{"a", 1}}}}}, error_code::wrong_type, "structured_outputs.choice[1]"},
      {{{"structured_outputs", map{{"json_object", false}}}}, error_code::invalid_value, "can only be true"},
      {{{"structured_outputs", map{{"regex", "a"}}}, {"response_format", map{{"type", "text"}}}}, error_code::invalid_value,
       "only one of 'response_format' and 'structured_outputs'"},
  };
  for (const auto& [extra, code, needle] : bad) expect_error(decode(generate_with(extra)), code, needle, "r1");
}

BOOST_AUTO_TEST_CASE(tokenize_has_no_prompt_ids) {
  expect_error(decode(map{{"v", 1}, {"type", "tokenize"}, {"prompt_ids", array{1}}}),
               error_code::unknown_field, "unknown field 'prompt_ids' in a tokenize request");
}

BOOST_AUTO_TEST_SUITE_END()

// chat_template_kwargs: a map whose keys become template variables; names the request's own
// fields set are refused naming them; it round-trips on tokenize too.
BOOST_AUTO_TEST_CASE(chat_template_kwargs_are_a_map_of_switches) {
  const array msgs{map{{"role", "user"}, {"content", "x"}}};
  auto d = decode(map{{"v", 1}, {"type", "generate"}, {"id", "k"}, {"messages", msgs},
                      {"chat_template_kwargs", map{{"style", "terse"}}}});
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  BOOST_TEST(std::get<generate_request>(*d.req).template_kwargs_json == R"({"style":"terse"})");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "k"}, {"messages", msgs},
                          {"chat_template_kwargs", map{{"enable_thinking", false}}}}),
               error_code::invalid_value, "give it as the field 'enable_thinking'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "k"}, {"messages", msgs},
                          {"chat_template_kwargs", map{{"messages", array{}}}}}),
               error_code::invalid_value, "'chat_template_kwargs.messages'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "k"}, {"messages", msgs}, {"chat_template_kwargs", 3}}),
               error_code::wrong_type, "'chat_template_kwargs'", "k");
  expect_error(decode(map{{"v", 1}, {"type", "generate"}, {"id", "k"}, {"messages", msgs}, {"chat_template", ""}}),
               error_code::invalid_value, "'chat_template' must not be empty", "k");
  tokenize_request t;
  t.id = "t";
  t.kind = prompt_kind::messages;
  t.messages = {{"user", "hi", "", ""}};
  t.template_kwargs_json = R"({"style":"terse"})";
  t.chat_template = "{{ messages }}";
  auto back = decode_request(encode_request(t));
  BOOST_REQUIRE_MESSAGE(back.ok(), back.error.message);
  BOOST_TEST((std::get<tokenize_request>(*back.req) == t));
}
