// Event encoding: golden bytes for each event kind (the field order clients may rely on), and a
// round trip through the client decoder.
#include <boost/test/unit_test.hpp>

#include <set>

#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/frame.hpp"
#include "tests/runtime/wire/msgpack_builder.hpp"

using namespace troupe::wire;
using namespace std::string_literals;

BOOST_AUTO_TEST_SUITE(event_codec)

BOOST_AUTO_TEST_CASE(golden_token_event) {
  std::string expected =
      "\x85"
      "\xa1v\x01"
      "\xa5" "event\xa5token"
      "\xa2id\xa2r1"
      "\xa4text\xa2Hi"
      "\xa3ids\x92\x01\xcd\x01\x00"s;  // [1, 256]
  BOOST_TEST(test::hex(encode_event(token_event{"r1", "Hi", {1, 256}, std::nullopt, std::nullopt, std::nullopt, std::nullopt})) == test::hex(expected));
}

BOOST_AUTO_TEST_CASE(golden_token_event_with_reasoning) {
  // The field order is fixed: reasoning right after text.
  std::string expected =
      "\x86"
      "\xa1v\x01"
      "\xa5" "event\xa5token"
      "\xa2id\xa2r1"
      "\xa4text\xa0"
      "\xa9reasoning\xa2Hm"
      "\xa3ids\x91\x07"s;
  BOOST_TEST(test::hex(encode_event(token_event{"r1", "", {7}, std::nullopt, std::string("Hm"), std::nullopt, std::nullopt})) == test::hex(expected));
}

BOOST_AUTO_TEST_CASE(golden_done_event) {
  done_event d;
  d.id = "r1";
  d.reason = finish_reason::length;
  d.usage = {3, 0, 2};
  d.timings = {1.5, 2.0, 4.0};
  std::string expected =
      "\x86"
      "\xa1v\x01"
      "\xa5" "event\xa4" "done"
      "\xa2id\xa2r1"
      "\xad" "finish_reason\xa6length"
      "\xa5usage\x83"
      "\xadprompt_tokens\x03"
      "\xb4" "cached_prompt_tokens\x00"
      "\xb1" "completion_tokens\x02"
      "\xa7timings\x83"
      "\xa8queue_ms\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00"
      "\xa7ttft_ms\xcb\x40\x00\x00\x00\x00\x00\x00\x00"
      "\xa8total_ms\xcb\x40\x10\x00\x00\x00\x00\x00\x00"s;
  BOOST_TEST(test::hex(encode_event(d)) == test::hex(std::string(expected.data(), expected.size())));
}

BOOST_AUTO_TEST_CASE(golden_error_event_without_id) {
  std::string expected =
      "\x85"
      "\xa1v\x01"
      "\xa5" "event\xa5" "error"
      "\xa2id\xc0"  // nil: the request's id could not be read
      "\xa4" "code\xa9malformed"
      "\xa7message\xa3" "bad"s;
  BOOST_TEST(test::hex(encode_event(wire_error{error_code::malformed, "bad", ""})) ==
             test::hex(expected));
}

BOOST_AUTO_TEST_CASE(framed_event_has_its_length_prefix) {
  std::string out = "prefix";
  append_event_frame(out, token_event{"r1", "Hi", {1, 256}, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  auto payload = encode_event(token_event{"r1", "Hi", {1, 256}, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  std::string header;
  append_frame_header(header, static_cast<uint32_t>(payload.size()));
  BOOST_TEST(out == "prefix" + header + payload);
}

BOOST_AUTO_TEST_CASE(every_event_round_trips) {
  done_event full;
  full.id = "a";
  full.reason = finish_reason::error;
  full.usage = {10, 4, 0};
  full.timings = {0.25, 0, 3.5};
  full.has_output = true;
  full.text = "partial \xe4\xbd\xa0";
  full.reasoning = "thought first";
  full.ids = {5, 6};
  full.error = wire_error{error_code::internal, "executor failed", "a"};
  full.tool_calls = {{"get_weather", R"({"city":"Rome"})"}, {"now", "{}"}};
  full.logprobs = {{-0.5, {{5, -0.5}}}, {-1.75, {}}};
  full.prompt_logprobs = std::vector<logprob_info>{{-3.25, {{9, -0.125}}, 4, 2}, {-0.5, {}, std::nullopt, std::nullopt}};
  full.prompt_ids = std::vector<int32_t>{3, 4, 151643};
  std::vector<event> events = {
      token_event{"a", "", {}, std::nullopt, std::nullopt, std::nullopt, std::nullopt},
      token_event{"a", "x", {7}, logprob_info{-0.25, {{7, -0.25}, {3, -2.5}}, std::nullopt, std::nullopt}, std::nullopt, std::nullopt, std::nullopt},
      token_event{"a", "", {8}, std::nullopt, std::string("step 1: 2 + 2"), std::nullopt, std::nullopt},
      token_event{"a", "y", {9}, std::nullopt, std::nullopt, 2, 143},  // a completion's first: its prompt's tokens
      full,
      wire_error{error_code::unknown_field, "unknown field 'x'", "b"},
      tokenize_event{"t", {1, 2, 3}},
      health_event{"h", "draining", 3, 7},
      models_event{"m", {{"qwen3-tiny", 4096, 151936, ""}, {"sql-lora", 4096, 151936, "qwen3-tiny"}}},
      // A first token event with return_prompt_ids: the prompt's ids too.
      token_event{"a", "z", {9}, std::nullopt, std::nullopt, std::nullopt, 3, std::vector<int32_t>{1, 2, 3}},
  };
  for (const auto& e : events) {
    auto d = decode_event(encode_event(e));
    BOOST_REQUIRE_MESSAGE(d.ok(), d.error);
    BOOST_TEST(d.ev->index() == e.index());
  }
  auto d = decode_event(encode_event(full));
  BOOST_TEST((std::get<done_event>(*d.ev) == full));
  BOOST_TEST((std::get<token_event>(*decode_event(encode_event(events[1])).ev) == std::get<token_event>(events[1])));
  BOOST_TEST((std::get<token_event>(*decode_event(encode_event(events[2])).ev) == std::get<token_event>(events[2])));
  BOOST_TEST(!std::get<token_event>(*decode_event(encode_event(events[1])).ev).reasoning.has_value());
  BOOST_TEST((std::get<token_event>(*decode_event(encode_event(events[3])).ev) == std::get<token_event>(events[3])));
  BOOST_TEST(!std::get<token_event>(*decode_event(encode_event(events[2])).ev).prompt_tokens.has_value());
  BOOST_TEST((std::get<token_event>(*decode_event(encode_event(events[9])).ev) == std::get<token_event>(events[9])));
  BOOST_TEST(!std::get<token_event>(*decode_event(encode_event(events[3])).ev).prompt_ids.has_value());
  auto h = std::get<health_event>(*decode_event(encode_event(events[7])).ev);
  BOOST_TEST(h.status == "draining");
  BOOST_TEST(h.waiting == 7);
  auto m = std::get<models_event>(*decode_event(encode_event(events[8])).ev);
  BOOST_TEST(m.models.at(0).vocab_size == 151936);
  BOOST_TEST(m.models.at(0).parent.empty());
  BOOST_TEST(m.models.at(1).name == "sql-lora");
  BOOST_TEST(m.models.at(1).parent == "qwen3-tiny");
}

// Every error code has its own name on the wire, and reads back as itself.
BOOST_AUTO_TEST_CASE(every_error_code_round_trips_by_name) {
  std::set<std::string_view> names;
  for (int i = 0; i < num_error_codes; ++i) {
    const auto code = static_cast<error_code>(i);
    names.insert(to_string(code));
    BOOST_TEST((parse_error_code(to_string(code)) == code));
    auto d = decode_event(encode_event(wire_error{code, "m", "x"}));
    BOOST_REQUIRE(d.ok());
    BOOST_TEST((std::get<wire_error>(*d.ev).code == code));
  }
  BOOST_TEST(names.size() == static_cast<size_t>(num_error_codes));
  BOOST_TEST(to_string(error_code::idle_timeout) == "idle_timeout");
  BOOST_TEST(!parse_error_code("idle").has_value());
}

// An embed request's done carries its embedding as float32 values, exactly.
BOOST_AUTO_TEST_CASE(an_embedding_rides_on_done_exactly) {
  done_event d;
  d.id = "e";
  d.index = 1;
  d.embedding = std::vector<float>{0.5f, -1.25e-7f, 3.4e38f, 0.0f, 1.0f / 3.0f, 1.0f, -2.0f};  // 1, -2: packed as ints
  auto back = std::get<done_event>(*decode_event(encode_event(d)).ev);
  BOOST_TEST((back == d));
  BOOST_TEST(*back.embedding == *d.embedding, boost::test_tools::per_element());
  d.embedding.reset();
  BOOST_TEST(encode_event(d).find("embedding") == std::string::npos);
}

// A classify input's done carries its label probabilities (float32, exactly) and likeliest label.
BOOST_AUTO_TEST_CASE(label_probabilities_ride_on_done_exactly) {
  done_event d;
  d.id = "c";
  d.index = 0;
  d.probs = std::vector<float>{0.25f, 1.0f / 3.0f, 0.0f, 1.0f};
  d.label = "positive";
  auto back = std::get<done_event>(*decode_event(encode_event(d)).ev);
  BOOST_TEST((back == d));
  BOOST_TEST(*back.probs == *d.probs, boost::test_tools::per_element());
  BOOST_TEST(back.label.value() == "positive");
  BOOST_TEST(!back.embedding.has_value());
  d.probs.reset();
  d.label.reset();
  const auto bytes = encode_event(d);
  BOOST_TEST((bytes.find("probs") == std::string::npos && bytes.find("label") == std::string::npos));
}

// A rerank document's done carries its score as a float64, exactly.
BOOST_AUTO_TEST_CASE(a_score_rides_on_done_exactly) {
  done_event d;
  d.id = "k";
  d.index = 2;
  d.score = 0.123456789012345678;
  auto back = std::get<done_event>(*decode_event(encode_event(d)).ev);
  BOOST_TEST((back == d));
  BOOST_TEST(back.score.value() == 0.123456789012345678);
  d.score.reset();
  BOOST_TEST(encode_event(d).find("score") == std::string::npos);
}

// Requests with n > 1: token and done events name their completion; others carry no index.
BOOST_AUTO_TEST_CASE(index_of_a_completion_round_trips) {
  token_event t{"n", "x", {7}, std::nullopt, std::nullopt, 3, std::nullopt};
  auto back = std::get<token_event>(*decode_event(encode_event(t)).ev);
  BOOST_TEST((back == t));
  BOOST_TEST(back.index.value() == 3);
  done_event d;
  d.id = "n";
  d.index = 0;
  auto dback = std::get<done_event>(*decode_event(encode_event(d)).ev);
  BOOST_TEST(dback.index.value() == 0);
  BOOST_TEST((dback == d));
  d.index.reset();
  BOOST_TEST(encode_event(d).find("index") == std::string::npos);
  BOOST_TEST(!std::get<done_event>(*decode_event(encode_event(d)).ev).index.has_value());
}

// prompt_logprobs on the wire: nil for the first prompt token, then one map per token.
BOOST_AUTO_TEST_CASE(prompt_logprobs_start_with_nil) {
  done_event d;
  d.id = "p";
  d.prompt_logprobs = std::vector<logprob_info>{{-1.5, {}}};
  auto payload = encode_event(d);
  BOOST_TEST(payload.find("\xafprompt_logprobs\x92\xc0"s) != std::string::npos);
  auto back = std::get<done_event>(*decode_event(payload).ev);
  BOOST_TEST((back == d));
  d.prompt_logprobs.reset();
  BOOST_TEST(encode_event(d).find("prompt_logprobs") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(client_decoder_rejects_garbage) {
  BOOST_TEST(decode_event("\xc1").error.find("not valid msgpack") != std::string::npos);
  BOOST_TEST(decode_event(test::pack(test::map{{"v", 1}, {"event", "boom"}})).error ==
             "unknown event 'boom'");
  BOOST_TEST(decode_event(test::pack(test::map{{"v", 1}, {"event", "token"}, {"id", "x"}})).error ==
             "missing field 'text'");
}

BOOST_AUTO_TEST_SUITE_END()
