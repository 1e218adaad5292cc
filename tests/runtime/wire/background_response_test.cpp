// Background responses (the Responses API's `background: true`): kept queued at once, then in
// progress with the output so far, then final (failed ones too) with their streamed events; the
// events, split one by one, are exactly the stream a foreground request gets; the stream query's
// bad values are refused naming them.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "tests/runtime/wire/generate_events.hpp"
#include "tests/runtime/wire/typed_sse.hpp"

#include "runtime/wire/background_response.hpp"

namespace oa = troupe::wire::openai;
namespace wire = troupe::wire;
using json = nlohmann::json;
using troupe::test::done;
using troupe::test::tok;

namespace {

const oa::served_models models{"qwen3", {}, 4096, {}};
constexpr int32_t think_end = 4;

oa::token_bytes_fn token_bytes() {
  return [](int32_t id) { return "t" + std::to_string(id); };
}



// <think>(1) "hm"(2) </think>(4) "Hi"(5) " there"(6), as a streamed generate sends them.
std::vector<wire::event> streamed_answer() {
  return {tok(1, ""), tok(2, "", "hm"), tok(4, ""), tok(5, "Hi"), tok(6, " there"), done(wire::finish_reason::stop)};
}

oa::parsed_responses parse(const std::string& body, oa::response_store* store, const std::string& id = "resp_0b") {
  auto p = oa::parse_responses(body, models, id, store);
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(background_responses)

BOOST_AUTO_TEST_CASE(kept_queued_then_in_progress_then_final_with_its_events) {
  auto store = std::make_shared<oa::response_store>(1 << 20);
  const std::string body = R"({"input": "hello", "background": true, "stream": true, "metadata": {"k": "v"}})";
  auto p = parse(body, store.get());
  BOOST_TEST(p.background);
  oa::background_response bg(p, 1700000000, token_bytes(), think_end, store);
  BOOST_TEST(bg.streamed());

  // Queued at once: its creator's answer, and what the store holds (not finished: its input only).
  const auto created = json::parse(bg.created_json());
  BOOST_TEST(created["status"] == "queued");
  BOOST_TEST(created["background"] == true);
  BOOST_TEST(created["id"] == "resp_0b");
  BOOST_TEST(created["output"].empty());
  auto kept = store->get("resp_0b");
  BOOST_TEST_REQUIRE(kept.has_value());
  BOOST_TEST(!kept->finished);
  BOOST_TEST(kept->items->size() == 1u);
  BOOST_TEST(json::parse(*kept->response)["status"] == "queued");
  BOOST_TEST(json::parse(bg.current_json())["status"] == "queued");

  // A foreground request's stream, for comparison: the same events but for the creation's status.
  auto fg_parsed = parse(R"({"input": "hello", "stream": true, "metadata": {"k": "v"}})", nullptr);
  oa::responses_builder fg(fg_parsed, 1700000000, token_bytes(), think_end);
  std::string fg_stream;

  const auto answer = streamed_answer();
  for (size_t i = 0; i < answer.size(); ++i) {
    bg.feed(answer[i]);
    fg_stream += fg.feed(answer[i]);
    if (i == 3) {  // under way: in progress, the items so far (the open message's text not yet out)
      const auto now = json::parse(bg.current_json());
      BOOST_TEST(now["status"] == "in_progress");
      BOOST_TEST_REQUIRE(now["output"].size() == 2u);
      BOOST_TEST(now["output"][0]["type"] == "reasoning");
      BOOST_TEST(now["output"][1]["status"] == "in_progress");
      BOOST_TEST(!bg.complete());
    }
  }
  BOOST_TEST(bg.complete());
  const auto fin = json::parse(bg.current_json());
  BOOST_TEST(fin["status"] == "completed");
  BOOST_TEST(fin["output"].back()["content"][0]["text"] == "Hi there");
  BOOST_TEST(fin["usage"]["output_tokens"] == 6);

  // One event each, sequence_number = its index; the stream is the foreground one's but for
  // response.created's status and `background`.
  const auto& ev = bg.events();
  const auto fg_events = troupe::test::typed_events(fg_stream);
  BOOST_TEST_REQUIRE(ev.size() == fg_events.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    const auto one = troupe::test::typed_events(ev[i]);
    BOOST_TEST_REQUIRE(one.size() == 1u, ev[i]);
    BOOST_TEST(one[0]["sequence_number"] == i);
    BOOST_TEST(one[0]["type"] == fg_events[i]["type"]);
    if (one[0].contains("delta")) BOOST_TEST(one[0]["delta"] == fg_events[i]["delta"]);
  }
  BOOST_TEST(troupe::test::typed_events(ev.front())[0]["response"]["status"] == "queued");
  BOOST_TEST(troupe::test::typed_events(ev[1])[0]["response"]["status"] == "in_progress");
  const auto last = troupe::test::typed_events(ev.back())[0];
  BOOST_TEST(last["type"] == "response.completed");
  BOOST_TEST(last["response"] == fin);

  // Kept final, with its events; a later response may now continue it.
  kept = store->get("resp_0b");
  BOOST_TEST_REQUIRE(kept.has_value());
  BOOST_TEST(kept->finished);
  BOOST_TEST(json::parse(*kept->response) == fin);
  BOOST_TEST_REQUIRE(kept->events != nullptr);
  BOOST_TEST(*kept->events == ev);
  BOOST_TEST(kept->items->size() == 1u + fin["output"].size());
  auto next = oa::parse_responses(R"({"input": "more", "previous_response_id": "resp_0b"})", models, "resp_1", store.get());
  BOOST_TEST(next.ok(), next.chat.error.message);

  bg.feed(done(wire::finish_reason::stop));  // after the end: nothing changes
  BOOST_TEST(bg.events().size() == ev.size());

  // events_after: from the one after `starting_after`; -1 gives all.
  std::string all;
  for (const auto& e : ev) all += e;
  BOOST_TEST(oa::events_after(ev, -1) == all);
  BOOST_TEST(oa::events_after(ev, 0) == all.substr(ev[0].size()));
  BOOST_TEST(oa::events_after(ev, static_cast<int64_t>(ev.size()) - 1).empty());
  BOOST_TEST(oa::events_after(ev, 1000).empty());
}

// Created without stream, it still builds its output token by token (its generate streams):
// polled while it runs it shows the text so far; it keeps no events, and ends as the streamed one.
BOOST_AUTO_TEST_CASE(a_whole_one_shows_its_text_so_far) {
  auto store = std::make_shared<oa::response_store>(1 << 20);
  auto p = parse(R"({"input": "hello", "background": true})", store.get());
  oa::background_response bg(p, 1700000000, token_bytes(), think_end, store);
  BOOST_TEST(!bg.streamed());
  auto sp = parse(R"({"input": "hello", "background": true, "stream": true})", store.get(), "resp_0c");
  oa::background_response streamed(sp, 1700000000, token_bytes(), think_end, store);
  const auto answer = streamed_answer();
  std::vector<std::string> texts;
  for (size_t i = 0; i < answer.size(); ++i) {
    bg.feed(answer[i]);
    streamed.feed(answer[i]);
    if (i + 1 == answer.size()) break;
    const auto now = json::parse(bg.current_json());
    BOOST_TEST(now["status"] == "in_progress");
    if (now["output"].size() == 2u && !now["output"][1]["content"].empty()) {
      BOOST_TEST(now["output"][0]["content"][0]["text"] == "hm");  // the thinking, whole
      BOOST_TEST(now["output"][1]["status"] == "in_progress");
      texts.push_back(now["output"][1]["content"][0]["text"]);
    }
  }
  const std::vector<std::string> expected = {"Hi", "Hi there"};
  BOOST_TEST(texts == expected, boost::test_tools::per_element());
  BOOST_TEST(bg.events().empty());
  auto fin = json::parse(bg.current_json()), sfin = json::parse(streamed.current_json());
  BOOST_TEST(fin["status"] == "completed");
  BOOST_TEST(fin["output"].back()["content"][0]["text"] == "Hi there");
  for (auto* j : {&fin, &sfin}) {
    j->erase("id");
    for (auto& item : (*j)["output"]) item.erase("id");
  }
  BOOST_TEST(fin == sfin);
}

// Given `conversation`, its input and output join the conversation when it ends, not before.
BOOST_AUTO_TEST_CASE(a_finished_one_extends_its_conversation) {
  auto store = std::make_shared<oa::response_store>(1 << 20);
  auto conversations = std::make_shared<oa::conversation_store>(1 << 20);
  oa::conversation c;
  c.id = "conv_1";
  c.append(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi"}}}));
  BOOST_TEST_REQUIRE((conversations->put(c) == oa::conversation_store::status::ok));
  auto p = oa::parse_responses(R"({"input": "hello", "background": true, "conversation": "conv_1"})", models, "resp_0d",
                               store.get(), conversations.get());
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  oa::background_response bg(p, 1700000000, token_bytes(), think_end, store, conversations);
  auto items_of = [&] {
    nlohmann::ordered_json items;
    BOOST_TEST_REQUIRE(conversations->read("conv_1", [&](const oa::conversation& c) { items = c.items; }));
    return items;
  };
  const auto answer = streamed_answer();
  for (size_t i = 0; i < answer.size(); ++i) {
    BOOST_TEST(items_of().size() == 1u);  // nothing added while it runs
    bg.feed(answer[i]);
  }
  const auto items = items_of();
  BOOST_TEST_REQUIRE(items.size() == 4u);  // Hi, hello, the reasoning and the message
  BOOST_TEST(items[1]["content"] == "hello");
  BOOST_TEST(items[3]["content"][0]["text"] == "Hi there");
}

BOOST_AUTO_TEST_CASE(a_running_one_cannot_be_continued) {
  auto store = std::make_shared<oa::response_store>(1 << 20);
  oa::background_response bg(parse(R"({"input": "a", "background": true})", store.get()), 1, token_bytes(), -1, store);
  BOOST_TEST(!bg.streamed());
  auto next = oa::parse_responses(R"({"input": "b", "previous_response_id": "resp_0b"})", models, "resp_1", store.get());
  BOOST_TEST(next.chat.error.status == 400);
  BOOST_TEST(next.chat.error.param == "previous_response_id");
  BOOST_TEST(next.chat.error.message.find("still running") != std::string::npos, next.chat.error.message);

  // A whole (not streamed) one: no events; in progress shows no output until its done.
  bg.feed(tok(5, "Hi"));
  BOOST_TEST(json::parse(bg.current_json())["status"] == "in_progress");
  auto d = done(wire::finish_reason::length);
  d.has_output = true;
  d.text = "Hi";
  d.ids = {5};
  bg.feed(d);
  BOOST_TEST(bg.complete());
  BOOST_TEST(bg.events().empty());
  const auto fin = json::parse(bg.current_json());
  BOOST_TEST(fin["status"] == "incomplete");
  BOOST_TEST(fin["incomplete_details"]["reason"] == "max_output_tokens");
  BOOST_TEST(store->get("resp_0b")->events == nullptr);
  next = oa::parse_responses(R"({"input": "b", "previous_response_id": "resp_0b"})", models, "resp_1", store.get());
  BOOST_TEST(next.ok(), next.chat.error.message);
}

// Its client learns of a failure only from the store: a refusal before any output (a foreground
// request would get an HTTP error instead) and a failure mid-way are kept as failed responses.
BOOST_AUTO_TEST_CASE(failures_are_kept_as_failed_responses) {
  for (const bool stream : {false, true}) {
    auto store = std::make_shared<oa::response_store>(1 << 20);
    const std::string body = std::string(R"({"input": "a", "background": true, "stream": )") + (stream ? "true" : "false") + "}";
    oa::background_response refused(parse(body, store.get(), "resp_r"), 1, token_bytes(), -1, store);
    refused.feed(wire::wire_error{wire::error_code::prompt_too_long, "the prompt has 9000 tokens", "x"});
    BOOST_TEST(refused.complete());
    auto r = json::parse(*store->get("resp_r")->response);
    BOOST_TEST(r["status"] == "failed");
    BOOST_TEST(r["error"]["code"] == "prompt_too_long");
    BOOST_TEST(r["error"]["message"] == "the prompt has 9000 tokens");
    if (stream) {
      BOOST_TEST_REQUIRE(refused.events().size() == 4u);  // created, in_progress, error, failed
      BOOST_TEST(troupe::test::typed_events(refused.events()[2])[0]["type"] == "error");
      BOOST_TEST(troupe::test::typed_events(refused.events()[3])[0]["response"] == r);
    }

    oa::background_response broken(parse(body, store.get(), "resp_m"), 1, token_bytes(), -1, store);
    broken.feed(tok(5, "Hi"));
    auto d = done(wire::finish_reason::error);
    d.error = wire::wire_error{wire::error_code::internal, "the executor failed", "x"};
    broken.feed(d);
    r = json::parse(*store->get("resp_m")->response);
    BOOST_TEST(r["status"] == "failed");
    BOOST_TEST(r["error"]["message"] == "the executor failed");
    BOOST_TEST(json::parse(broken.current_json()) == r);
  }
}

// The store keeps a response without its events when they would not fit, rather than not at all.
BOOST_AUTO_TEST_CASE(events_too_big_for_the_store_are_dropped_not_the_response) {
  auto store = std::make_shared<oa::response_store>(6000);
  oa::background_response bg(parse(R"({"input": "a", "background": true, "stream": true})", store.get()), 1,
                              token_bytes(), -1, store);
  for (int i = 0; i < 60; ++i) bg.feed(tok(7, "word "));
  bg.feed(done(wire::finish_reason::stop));
  size_t bytes = 0;
  for (const auto& e : bg.events()) bytes += e.size();
  BOOST_TEST(bytes > 6000u);
  const auto kept = store->get("resp_0b");
  BOOST_TEST_REQUIRE(kept.has_value());
  BOOST_TEST(kept->finished);
  BOOST_TEST(kept->events == nullptr);
  BOOST_TEST(json::parse(*kept->response)["status"] == "completed");
}

BOOST_AUTO_TEST_CASE(background_needs_the_store) {
  oa::response_store store(1 << 20);
  auto p = oa::parse_responses(R"({"input": "a", "background": true, "store": false})", models, "resp_1", &store);
  BOOST_TEST(p.chat.error.status == 400);
  BOOST_TEST(p.chat.error.code == "invalid_value");
  BOOST_TEST(p.chat.error.param == "background");
  p = oa::parse_responses(R"({"input": "a", "background": true})", models, "resp_1", nullptr);
  BOOST_TEST(p.chat.error.status == 400);
  BOOST_TEST(p.chat.error.code == "unsupported");
  BOOST_TEST(p.chat.error.message.find("responses_store_bytes = 0") != std::string::npos, p.chat.error.message);
  p = oa::parse_responses(R"({"input": "a", "background": "yes"})", models, "resp_1", &store);
  BOOST_TEST(p.chat.error.param == "background");
  p = oa::parse_responses(R"({"input": "a", "background": false})", models, "resp_1", &store);
  BOOST_TEST(p.ok());
  BOOST_TEST(!p.background);
}

BOOST_AUTO_TEST_CASE(the_stream_query_is_checked) {
  using q = std::optional<std::string>;
  auto s = oa::parse_stream_query(std::nullopt, std::nullopt);
  BOOST_TEST((!s.error && !s.stream && s.starting_after == -1));
  s = oa::parse_stream_query(q("true"), q("41"));
  BOOST_TEST((!s.error && s.stream && s.starting_after == 41));
  s = oa::parse_stream_query(q("false"), std::nullopt);
  BOOST_TEST((!s.error && !s.stream));
  const std::vector<std::tuple<q, q, std::string>> bad{{q("yes"), std::nullopt, "stream"},
                                                       {q("true"), q("x"), "starting_after"},
                                                       {q("true"), q("4x"), "starting_after"},
                                                       {q("true"), q(""), "starting_after"},
                                                       {q("true"), q("-2"), "starting_after"},
                                                       {q("true"), q("99999999999999999999"), "starting_after"},
                                                       {std::nullopt, q("3"), "starting_after"}};
  for (const auto& [stream, after, param] : bad) {
    s = oa::parse_stream_query(stream, after);
    BOOST_TEST_REQUIRE(s.error.has_value(), param);
    BOOST_TEST(s.error->status == 400);
    BOOST_TEST(s.error->param == param);
  }
}

BOOST_AUTO_TEST_SUITE_END()
