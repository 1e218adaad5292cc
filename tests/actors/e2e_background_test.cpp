// The Responses API's background responses end to end over real TCP: answered at once as queued,
// they run on after their client leaves and give the same answer as a foreground request; a
// streamed one is replayed and followed from any connection (starting_after), cancelled with its
// KV blocks back, and its bad uses get OpenAI's error shape naming what was wrong.
#include "tests/actors/e2e_fixture.hpp"

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/actors/http_client.hpp"

using namespace troupe;
using namespace troupe::e2e;
using json = nlohmann::json;

namespace {

serve::server_config roomy_config() {
  auto c = test_config();
  c.max_model_len = 2048;  // room for answers long enough to still run when the test acts on them
  c.max_num_batched_tokens = 2048;
  return c;
}

json body(int max_output_tokens, bool background, bool stream = false) {
  json b = {{"input", "Say something."}, {"max_output_tokens", max_output_tokens}, {"ignore_eos", true},
            {"temperature", 0}};
  if (background) b["background"] = true;
  else b["store"] = false;
  if (stream) b["stream"] = true;
  return b;
}

// The foreground (neither background nor stored) answer to body(max_output_tokens).
json foreground(http_client& c, int max_output_tokens) {
  c.post("/v1/responses", body(max_output_tokens, false).dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  return json::parse(r.body);
}

json without_ids(json items) {
  for (auto& it : items) it.erase("id");
  return items;
}

// GETs response `id` until its status is no longer queued or in progress.
json wait_for(http_client& c, const std::string& id) {
  json r;
  eventually(
      [&] {
        c.get("/v1/responses/" + id);
        auto a = c.read();
        BOOST_TEST_REQUIRE(a.status == 200, a.body);
        r = json::parse(a.body);
        return r["status"] != "queued" && r["status"] != "in_progress";
      },
      std::chrono::seconds(60));
  return r;
}

// The event-stream of a response body, each event's text whole (as events() keeps them).
std::vector<std::string> event_texts(const std::string& body) {
  std::vector<std::string> out;
  for (size_t at = 0; at < body.size();) {
    const size_t end = body.find("\n\n", at);
    BOOST_TEST_REQUIRE(end != std::string::npos);
    out.push_back(body.substr(at, end + 2 - at));
    at = end + 2;
  }
  return out;
}

json event_json(const std::string& text) { return json::parse(text.substr(text.find("data: ") + 6)); }

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_background)

// Answered at once as queued; its client leaves; it runs on and its answer (polled by another
// client) is the foreground request's. A cancel after the end gives it unchanged.
BOOST_AUTO_TEST_CASE(a_background_response_runs_without_its_client) {
  auto srv = start(roomy_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  const auto fg = foreground(c, 12);
  http_reply r;

  std::string id;
  {
    http_client creator(srv->http_port());
    creator.post("/v1/responses", body(12, true).dump());
    r = creator.read();
    BOOST_TEST_REQUIRE(r.status == 200, r.body);
    const auto queued = json::parse(r.body);
    BOOST_TEST(queued["status"] == "queued");
    BOOST_TEST(queued["background"] == true);
    BOOST_TEST(queued["store"] == true);
    BOOST_TEST(queued["output"].empty());
    id = queued["id"];
  }  // the creator leaves at once
  const auto fin = wait_for(c, id);
  BOOST_TEST(fin["status"] == "incomplete");  // as the foreground one: max_output_tokens
  BOOST_TEST(fin["status"] == fg["status"]);
  BOOST_TEST(fin["background"] == true);
  BOOST_TEST(without_ids(fin["output"]) == without_ids(fg["output"]));
  BOOST_TEST(fin["usage"]["output_tokens"] == 12);
  c.get("/v1/responses/" + id + "/input_items");
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["data"][0]["content"][0]["text"] == "Say something.");
  c.post("/v1/responses/" + id + "/cancel", "");
  r = c.read();
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body) == fin);  // cancelling a finished one changes nothing
  c.del("/v1/responses/" + id);
  BOOST_TEST(c.read().status == 200);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// Streamed: the creator gets the events as they come (created queued, sequence numbers 0..n-1,
// the foreground answer at the end); GET ?stream=true replays them byte for byte, from any
// sequence number on.
BOOST_AUTO_TEST_CASE(a_streamed_one_is_replayed_from_any_event) {
  auto srv = start(roomy_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  const auto fg = foreground(c, 10);
  c.post("/v1/responses", body(10, true, true).dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(r.head.find("text/event-stream") != std::string::npos);
  const std::string stream = r.body;
  const auto ev = event_texts(stream);
  BOOST_TEST_REQUIRE(ev.size() > 4u);
  for (size_t i = 0; i < ev.size(); ++i) BOOST_TEST(event_json(ev[i])["sequence_number"] == i);
  BOOST_TEST(event_json(ev[0])["type"] == "response.created");
  BOOST_TEST(event_json(ev[0])["response"]["status"] == "queued");
  const auto last = event_json(ev.back());
  BOOST_TEST(last["type"] == "response.completed");
  BOOST_TEST(without_ids(last["response"]["output"]) == without_ids(fg["output"]));
  const std::string id = last["response"]["id"];

  c.get("/v1/responses/" + id + "?stream=true");
  r = c.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body == stream);
  c.get("/v1/responses/" + id + "?stream=true&starting_after=3");
  r = c.read();
  BOOST_TEST(r.status == 200);
  std::string tail;
  for (size_t i = 4; i < ev.size(); ++i) tail += ev[i];
  BOOST_TEST(r.body == tail);
  c.get("/v1/responses/" + id);
  r = c.read();
  BOOST_TEST(json::parse(r.body) == last["response"]);
}

// A long streamed one: its creator leaves mid-way and it runs on; another connection follows it
// from sequence number 2 while a third cancels it: the follower's stream ends with the cancelled
// response, the canceller gets the same, and every KV block comes back.
BOOST_AUTO_TEST_CASE(followed_from_another_connection_then_cancelled) {
  auto srv = start(roomy_config(), full_vocab_dir, tokenizer_dir);
  std::string id;
  {
    http_client creator(srv->http_port());
    creator.post("/v1/responses", body(1900, true, true).dump());
    creator.read_some(1500);  // the head and response.created, which names it
    const std::string& got = creator.received();
    const auto at = got.find("\"id\":\"resp_");
    BOOST_TEST_REQUIRE(at != std::string::npos, got);
    id = got.substr(at + 6, 37);
  }  // the creator leaves mid-stream
  // Likely on the creator's socket number, which the server must not take for the creator's:
  // this connection gets its own answers, not the rest of that stream.
  http_client poll(srv->http_port());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its leaving has been seen (~2,800 tokens/s here)
  poll.get("/v1/responses/" + id);
  auto r = poll.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["status"] == "in_progress");  // not cancelled by its creator's leaving
  BOOST_TEST(metric(*srv, "num_requests_running") == 1);

  http_client follower(srv->http_port());
  follower.get("/v1/responses/" + id + "?stream=true&starting_after=2");
  follower.read_some(1000);  // following
  http_client canceller(srv->http_port());
  canceller.post("/v1/responses/" + id + "/cancel", "");
  r = canceller.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto cancelled = json::parse(r.body);
  BOOST_TEST(cancelled["status"] == "cancelled");
  const int64_t made = cancelled["usage"]["output_tokens"];
  BOOST_TEST(made < 1900);

  r = follower.read();
  BOOST_TEST_REQUIRE(r.status == 200);
  const auto ev = event_texts(r.body);
  BOOST_TEST_REQUIRE(ev.size() > 2u);
  for (size_t i = 0; i < ev.size(); ++i) BOOST_TEST(event_json(ev[i])["sequence_number"] == i + 3);
  const auto last = event_json(ev.back());
  BOOST_TEST(last["type"] == "response.completed");  // whatever the status, as vLLM's last event
  BOOST_TEST(last["response"] == cancelled);

  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  poll.get("/v1/responses/" + id);
  r = poll.read();
  BOOST_TEST(json::parse(r.body) == cancelled);  // kept as it ended
  poll.post("/v1/responses/" + id + "/cancel", "");
  r = poll.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(json::parse(r.body) == cancelled);  // twice: the same
  // The follower's connection serves its next request.
  follower.get("/v1/responses/" + id + "?stream=true&starting_after=" + std::to_string(2 + ev.size()));
  r = follower.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body.empty());  // nothing after the last event
}

// Not streamed, polled while it runs: its output grows token by token (each poll's text starts
// the next one's), and the response it ends as (cancelled here) holds what the polls showed.
BOOST_AUTO_TEST_CASE(a_whole_one_shows_its_output_so_far_while_it_runs) {
  auto srv = start(roomy_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  c.post("/v1/responses", body(1900, true).dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const std::string id = json::parse(r.body)["id"];
  auto text_now = [&](std::string& text) {
    c.get("/v1/responses/" + id);
    auto a = c.read();
    BOOST_TEST_REQUIRE(a.status == 200, a.body);
    const auto j = json::parse(a.body);
    if (j["status"] != "in_progress" || j["output"].empty()) return false;
    const auto& item = j["output"].back();
    if (item["type"] != "message" || item["content"].empty()) return false;
    text = item["content"][0]["text"];
    return item["status"] == "in_progress" && !text.empty();
  };
  std::string first, later;
  BOOST_TEST_REQUIRE(eventually([&] { return text_now(first); }));
  BOOST_TEST_REQUIRE(eventually([&] { return text_now(later) && later.size() > first.size(); }));
  BOOST_TEST(later.substr(0, first.size()) == first);
  c.post("/v1/responses/" + id + "/cancel", "");
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto cancelled = json::parse(r.body);
  BOOST_TEST(cancelled["status"] == "cancelled");
  const std::string final_text = cancelled["output"].back()["content"][0]["text"];
  BOOST_TEST(final_text.substr(0, later.size()) == later);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// Limits and bad uses: the cap on running ones (429), a store that is off, store: false, the
// stream query, a stream of a response that has none, deleting or continuing a running one,
// cancelling a foreground or unknown one; a prompt refused after the answer is kept as failed.
BOOST_AUTO_TEST_CASE(bad_uses_are_refused_naming_what_was_wrong) {
  auto cfg = roomy_config();
  cfg.max_background_responses = 1;
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  auto expect = [&](int status, const std::string& param) {
    auto r = c.read();
    BOOST_TEST(r.status == status, r.body);
    BOOST_TEST(json::parse(r.body)["error"]["param"] == param, r.body);
  };
  c.post("/v1/responses", body(1900, true).dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const std::string id = json::parse(r.body)["id"];
  c.post("/v1/responses", body(4, true).dump());
  expect(429, "background");
  c.del("/v1/responses/" + id);
  expect(400, "response_id");
  json next = body(4, false);
  next["previous_response_id"] = id;
  c.post("/v1/responses", next.dump());
  expect(400, "previous_response_id");
  c.get("/v1/responses/" + id + "?stream=true");  // created without stream: no events
  expect(400, "stream");
  c.get("/v1/responses/" + id + "?stream=maybe");
  expect(400, "stream");
  c.get("/v1/responses/" + id + "?stream=true&starting_after=x");
  expect(400, "starting_after");
  c.get("/v1/responses/" + id + "?starting_after=3");
  expect(400, "starting_after");
  c.get("/v1/responses/" + id + "/cancel");
  BOOST_TEST(c.read().status == 405);
  c.post("/v1/responses/" + id + "/cancel", "");
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["status"] == "cancelled");
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));

  json fg = body(2, false);
  fg["store"] = true;
  c.post("/v1/responses", fg.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  c.post("/v1/responses/" + json::parse(r.body)["id"].get<std::string>() + "/cancel", "");
  expect(400, "response_id");  // not a background one
  c.post("/v1/responses/resp_0123/cancel", "");
  expect(404, "response_id");
  c.get("/v1/responses/resp_0123?stream=true");
  expect(404, "response_id");
  json unstored = body(2, true);
  unstored["store"] = false;
  c.post("/v1/responses", unstored.dump());
  expect(400, "background");

  // Refused after it was answered (the prompt is over max_model_len once tokenized): kept failed.
  json long_prompt = body(4, true);
  std::string words;
  for (int i = 0; i < 2500; ++i) words += "word ";
  long_prompt["input"] = words;
  c.post("/v1/responses", long_prompt.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto failed = wait_for(c, json::parse(r.body)["id"]);
  BOOST_TEST(failed["status"] == "failed");
  BOOST_TEST(failed["error"]["code"] == "prompt_too_long", failed.dump());

  // No store: background cannot be served, and says why.
  auto bare_cfg = test_config();
  bare_cfg.responses_store_bytes = 0;
  auto bare = start(bare_cfg, full_vocab_dir, tokenizer_dir);
  http_client b(bare->http_port());
  b.post("/v1/responses", body(2, true).dump());
  r = b.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body.find("responses_store_bytes = 0") != std::string::npos, r.body);
}

BOOST_AUTO_TEST_SUITE_END()
