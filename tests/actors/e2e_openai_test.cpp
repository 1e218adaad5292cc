// The OpenAI-compatible HTTP API end to end over real TCP: completions give exactly the tokens
// `troupe generate` gives (whole or streamed, greedy or seeded, n > 1), chat gives the msgpack
// protocol's text, keep-alive and pipelining answer in order, bad requests get OpenAI's error
// shape with the right status, and a client that leaves mid-stream frees its KV blocks.
#include "tests/actors/e2e_fixture.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/core/version.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tests/actors/http_client.hpp"

using namespace troupe;
using namespace troupe::e2e;
using json = nlohmann::json;

namespace {


std::string completion_body(const wire::generate_request& r, bool stream, int n = 1) {
  json b = {{"model", "tiny-dense"}, {"prompt", r.prompt_ids}, {"max_tokens", *r.max_tokens}, {"logprobs", 0},
            {"ignore_eos", true}, {"temperature", *r.sampling.temperature}, {"stream", stream}};
  if (r.sampling.seed) b["seed"] = *r.sampling.seed;
  if (n > 1) b["n"] = n;
  return b.dump();
}

// A weather tool's parameters, and a chat conversation that called it and got its result: what
// the Responses and Messages tests send in their own API's form. Key order matters: Qwen3's
// template prints each tool as JSON, as the client ordered it (OpenAI's SDK: "type" first).
nlohmann::ordered_json weather_params() {
  return nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
}

nlohmann::ordered_json weather_chat_body(bool ignore_eos) {
  using ojson = nlohmann::ordered_json;
  ojson b = {{"messages", ojson::parse(R"([{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Weather in Paris?"},
                 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "20 C"}])")},
             {"tools", {{{"type", "function"}, {"function", {{"name", "weather"}, {"parameters", weather_params()}}}}}},
             {"max_tokens", 14}};
  if (ignore_eos) b["ignore_eos"] = true;
  b["temperature"] = 0;
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_openai)

BOOST_AUTO_TEST_CASE(completions_give_the_reference_tokens) {
  auto srv = start(test_config());
  BOOST_TEST_REQUIRE(srv->http_port() != 0);
  std::mt19937 rng(7);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(ids_request("r" + std::to_string(i), random_prompt(rng, 40), 3 + i * 3, i % 2 ? 100 + i : -1));
  // Streams on their own connections at once (they share steps), whole bodies after them.
  std::vector<std::unique_ptr<http_client>> streams;
  for (const auto& r : reqs) {
    streams.push_back(std::make_unique<http_client>(srv->http_port()));
    streams.back()->post("/v1/completions", completion_body(r, true));
  }
  http_client whole(srv->http_port());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto want = reference(tiny_dense(), reqs[i]);
    auto s = streams[i]->read();
    BOOST_TEST_REQUIRE(s.status == 200, s.body);
    BOOST_TEST(s.head.find("Content-Type: text/event-stream") != std::string::npos);
    std::vector<int32_t> got;
    std::string finish;
    auto ev = sse_events(s.body);
    BOOST_TEST_REQUIRE(!ev.empty());
    BOOST_TEST(ev.back() == "[DONE]");
    for (const auto& e : ev) {
      if (e == "[DONE]") continue;
      BOOST_TEST(e["object"] == "text_completion");
      const auto& c = e["choices"][0];
      if (!c["logprobs"].is_null()) {
        auto ids = logprob_ids(c["logprobs"]);
        got.insert(got.end(), ids.begin(), ids.end());
      }
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
    BOOST_TEST(got == want, boost::test_tools::per_element());
    BOOST_TEST(finish == "length");

    whole.post("/v1/completions", completion_body(reqs[i], false));
    auto w = whole.read();
    BOOST_TEST_REQUIRE(w.status == 200, w.body);
    auto j = json::parse(w.body);
    BOOST_TEST(logprob_ids(j["choices"][0]["logprobs"]) == want, boost::test_tools::per_element());
    BOOST_TEST(j["usage"]["prompt_tokens"] == reqs[i].prompt_ids.size());
    BOOST_TEST(j["usage"]["completion_tokens"] == want.size());
    BOOST_TEST(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// continuous_usage_stats over real TCP: the prompt's tokens come with the first token event
// (the protocol's prompt_tokens), so every chunk counts usage as the stream goes.
BOOST_AUTO_TEST_CASE(continuous_usage_counts_as_the_stream_goes) {
  auto srv = start(test_config());
  http_client c(srv->http_port());
  // (A model without a tokenizer has no text: logprobs make a chunk of every token.)
  c.post("/v1/completions", json({{"prompt", {5, 6, 7, 8, 9}}, {"max_tokens", 4}, {"ignore_eos", true}, {"stream", true},
                                  {"logprobs", 0},
                                  {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}})
                                .dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  std::vector<int64_t> completion;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    BOOST_TEST(e["usage"]["prompt_tokens"] == 5);
    if (!e["choices"].empty()) completion.push_back(e["usage"]["completion_tokens"]);
  }
  BOOST_TEST(completion == (std::vector<int64_t>{1, 2, 3, 4, 4}), boost::test_tools::per_element());
}

// vLLM's return_token_ids over real TCP: a completion's token_ids are troupe generate's tokens
// and its prompt_token_ids the prompt; a chat answer's prompt_token_ids are the templated prompt
// (the msgpack tokenize of the same messages) and its token_ids as many as its usage says;
// streamed, the ids come back the same, the prompt's on the first chunk.
BOOST_AUTO_TEST_CASE(return_token_ids_give_the_models_ids) {
  auto srv = start(test_config());
  http_client c(srv->http_port());
  auto r = ids_request("r", {5, 6, 7, 8, 9}, 6, 17);
  const auto want = reference(tiny_dense(), r);
  for (const bool stream : {false, true}) {
    json body = json::parse(completion_body(r, stream));
    body["return_token_ids"] = true;
    c.post("/v1/completions", body.dump());
    auto w = c.read();
    BOOST_TEST_REQUIRE(w.status == 200, w.body);
    std::vector<int32_t> ids, prompt;
    if (!stream) {
      const auto j = json::parse(w.body);
      ids = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
      prompt = j["choices"][0]["prompt_token_ids"].get<std::vector<int32_t>>();
    } else {
      for (const auto& e : sse_events(w.body)) {
        if (e == "[DONE]") continue;
        const auto& ch = e["choices"][0];
        for (const auto& id : ch["token_ids"]) ids.push_back(id.get<int32_t>());
        if (ch.contains("prompt_token_ids")) {
          BOOST_TEST(prompt.empty());  // once
          prompt = ch["prompt_token_ids"].get<std::vector<int32_t>>();
        }
      }
    }
    BOOST_TEST(ids == want, boost::test_tools::per_element());
    BOOST_TEST(prompt == r.prompt_ids, boost::test_tools::per_element());
  }

  auto text_srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client t(text_srv->http_port());
  const json messages = {{{"role", "user"}, {"content", "Hello there"}}};
  wire::tokenize_request tr;
  tr.id = "t";
  tr.kind = wire::prompt_kind::messages;
  tr.messages = {{"user", "Hello there", "", ""}};
  client::client cl("127.0.0.1", text_srv->port());
  const auto templated = cl.tokenize(tr);
  std::vector<int32_t> whole_ids;
  for (const bool stream : {false, true}) {
    t.post("/v1/chat/completions", json({{"messages", messages}, {"max_tokens", 8}, {"ignore_eos", true}, {"temperature", 0},
                                         {"return_token_ids", true}, {"stream", stream}})
                                       .dump());
    auto w = t.read();
    BOOST_TEST_REQUIRE(w.status == 200, w.body);
    std::vector<int32_t> ids, prompt;
    if (!stream) {
      const auto j = json::parse(w.body);
      ids = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
      prompt = j["prompt_token_ids"].get<std::vector<int32_t>>();
      BOOST_TEST(j["usage"]["prompt_tokens"] == prompt.size());
      BOOST_TEST(j["usage"]["completion_tokens"] == ids.size());
      whole_ids = ids;
    } else {
      for (const auto& e : sse_events(w.body)) {
        if (e == "[DONE]") continue;
        if (e.contains("prompt_token_ids")) prompt = e["prompt_token_ids"].get<std::vector<int32_t>>();
        for (const auto& id : e["choices"][0]["token_ids"]) ids.push_back(id.get<int32_t>());
      }
      BOOST_TEST(ids == whole_ids, boost::test_tools::per_element());
    }
    BOOST_TEST(prompt == templated, boost::test_tools::per_element());
    BOOST_TEST(ids.size() == 8u);
  }
}

BOOST_AUTO_TEST_CASE(n_completions_in_one_response) {
  auto srv = start(test_config());
  auto r = ids_request("n", {5, 6, 7, 8}, 6, 42);
  http_client c(srv->http_port());
  c.post("/v1/completions", completion_body(r, false, 3));
  auto w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  auto j = json::parse(w.body);
  BOOST_TEST_REQUIRE(j["choices"].size() == 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    auto ri = r;
    ri.sampling.seed = 42 + i;  // completion i samples with seed + i (docs/protocol.md)
    BOOST_TEST(j["choices"][i]["index"] == i);
    BOOST_TEST(logprob_ids(j["choices"][i]["logprobs"]) == reference(tiny_dense(), ri), boost::test_tools::per_element());
  }
  BOOST_TEST(j["usage"]["prompt_tokens"] == 4);
  BOOST_TEST(j["usage"]["completion_tokens"] == 18);
}

// A batch of prompts (vLLM's list form), whole and streamed: choice p * n + j is what prompt p
// with seed + j gives alone; over msgpack (`prompts`) the same completions by index.
BOOST_AUTO_TEST_CASE(a_batch_of_prompts_gives_each_prompts_completions) {
  auto srv = start(test_config());
  const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7, 8}, {300, 2, 9}, {5, 6, 7, 8, 11, 12, 13}};
  std::vector<std::vector<int32_t>> want;  // by choice
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) {
    prompt_tokens += static_cast<int64_t>(p.size());
    for (uint64_t j = 0; j < 2; ++j) want.push_back(reference(tiny_dense(), ids_request("ref", p, 5, 42 + j)));
  }
  json body = {{"model", "tiny-dense"}, {"prompt", prompts}, {"max_tokens", 5}, {"logprobs", 0}, {"ignore_eos", true},
               {"temperature", 0.8}, {"seed", 42}, {"n", 2}};
  http_client c(srv->http_port());
  c.post("/v1/completions", body.dump());
  auto w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  auto j = json::parse(w.body);
  BOOST_TEST_REQUIRE(j["choices"].size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(j["choices"][i]["index"] == i);
    BOOST_TEST(logprob_ids(j["choices"][i]["logprobs"]) == want[i], boost::test_tools::per_element());
  }
  BOOST_TEST(j["usage"]["prompt_tokens"] == prompt_tokens);
  BOOST_TEST(j["usage"]["completion_tokens"] == 5 * want.size());
  body["stream"] = true;
  c.post("/v1/completions", body.dump());
  auto s = c.read();
  BOOST_TEST_REQUIRE(s.status == 200, s.body);
  std::vector<std::vector<int32_t>> got(want.size());
  size_t finished = 0;
  for (const auto& e : sse_events(s.body)) {
    if (e == "[DONE]") continue;
    const auto& ch = e["choices"][0];
    const auto i = ch["index"].get<size_t>();
    BOOST_TEST_REQUIRE(i < got.size());
    if (!ch["logprobs"].is_null()) {
      auto ids = logprob_ids(ch["logprobs"]);
      got[i].insert(got[i].end(), ids.begin(), ids.end());
    }
    if (!ch["finish_reason"].is_null()) ++finished;
  }
  BOOST_TEST(finished == want.size());
  for (size_t i = 0; i < want.size(); ++i) BOOST_TEST(got[i] == want[i], boost::test_tools::per_element());
  // The protocol's own batch, through the C++ client.
  auto r = ids_request("batch", {}, 5, 42);
  r.prompt_ids.clear();
  for (const auto& p : prompts) r.prompts.push_back({wire::prompt_kind::ids, {}, p});
  r.n = 2;
  r.stream = true;
  client::client cl("127.0.0.1", srv->port());
  auto all = cl.complete_all(r);
  BOOST_TEST_REQUIRE(all.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST(all[i].ids == want[i], boost::test_tools::per_element());
    BOOST_TEST(all[i].done.usage.prompt_tokens == static_cast<int64_t>(prompts[i / 2].size()));
  }
  // One bad prompt refuses the batch, naming it.
  c.post("/v1/completions", json({{"prompt", {prompts[0], std::vector<int32_t>{1, 999999}}}, {"max_tokens", 1}}).dump());
  auto bad = c.read();
  BOOST_TEST(bad.status == 400);
  BOOST_TEST(json::parse(bad.body)["error"]["message"].get<std::string>().find("prompts[1]") != std::string::npos, bad.body);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// truncate_prompt_tokens: the completion of a long prompt cut to its last k tokens is that of
// those k tokens alone; usage counts them.
BOOST_AUTO_TEST_CASE(a_truncated_prompt_completes_as_its_tail) {
  auto srv = start(test_config());
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 40; ++i) prompt.push_back(100 + 7 * i);
  const std::vector<int32_t> tail(prompt.end() - 9, prompt.end());
  const auto want = reference(tiny_dense(), ids_request("ref", tail, 5));
  http_client c(srv->http_port());
  c.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true},
                                 {"logprobs", 0}, {"truncate_prompt_tokens", 9}}.dump());
  auto w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  auto j = json::parse(w.body);
  BOOST_TEST(logprob_ids(j["choices"][0]["logprobs"]) == want, boost::test_tools::per_element());
  BOOST_TEST(j["usage"]["prompt_tokens"] == 9);
  c.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 1}, {"truncate_prompt_tokens", 100000}}.dump());
  auto bad = c.read();
  BOOST_TEST(bad.status == 400);
  BOOST_TEST(json::parse(bad.body)["error"]["message"].get<std::string>().find("exceeds max_model_len") != std::string::npos);
}

// Forced tool calls on the real tokenizer and a full-vocabulary model: the output is held to the
// call's JSON (named: the function's parameters; required: an array of calls), answered as
// tool_calls whose arguments are that JSON, finish_reason "stop".
BOOST_AUTO_TEST_CASE(forced_tool_calls_are_answered_as_calls) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "convert", "parameters":
      {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"]}}},
      {"type": "function", "function": {"name": "now"}}])");
  const json base = {{"messages", {{{"role", "user"}, {"content", "Which unit?"}}}}, {"tools", tools},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}, {"max_tokens", 60}, {"temperature", 0.7},
                     {"seed", 3}};
  auto named = base;
  named["tool_choice"] = {{"type", "function"}, {"function", {{"name", "convert"}}}};
  c.post("/v1/chat/completions", named.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  auto j = json::parse(r.body);
  BOOST_TEST(j["choices"][0]["finish_reason"] == "stop", r.body);
  const auto& call = j["choices"][0]["message"]["tool_calls"][0]["function"];
  BOOST_TEST(call["name"] == "convert");
  const auto args = json::parse(call["arguments"].get<std::string>());
  BOOST_TEST((args == json{{"unit", "c"}} || args == json{{"unit", "f"}}), args.dump());
  auto required = base;
  required["tool_choice"] = "required";
  required["parallel_tool_calls"] = false;  // one call: the array ends after it
  c.post("/v1/chat/completions", required.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  j = json::parse(r.body);
  const auto& calls = j["choices"][0]["message"]["tool_calls"];
  BOOST_TEST_REQUIRE(calls.size() == 1u, r.body);
  BOOST_TEST(j["choices"][0]["finish_reason"] == "stop");
  for (const auto& k : calls) {
    const auto name = k["function"]["name"].get<std::string>();
    const auto a = json::parse(k["function"]["arguments"].get<std::string>());
    BOOST_TEST((name == "now" ? a == json::object() : (a == json{{"unit", "c"}} || a == json{{"unit", "f"}})), k.dump());
  }
}

// A server told its model writes Qwen3-Coder's XML calls (tool_call_parser qwen3_coder) answers
// them as tool_calls, each value typed by the tool's schema. The random model is held to such a
// call by a regex (structured output), whole and streamed.
BOOST_AUTO_TEST_CASE(qwen3_coder_calls_are_answered_as_calls) {
  auto cfg = test_config();
  cfg.tool_call_parser = "qwen3_coder";
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
               {"tools", json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
                   {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])")},
               {"guided_regex", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                                "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"},
               {"chat_template_kwargs", {{"enable_thinking", false}}}, {"max_tokens", 150}, {"temperature", 0}};
  c.post("/v1/chat/completions", body.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  auto j = json::parse(r.body);
  BOOST_TEST(j["choices"][0]["finish_reason"] == "tool_calls", r.body);  // the regex, then the end token
  const auto& calls = j["choices"][0]["message"]["tool_calls"];
  BOOST_TEST_REQUIRE(calls.size() == 1u, r.body);
  BOOST_TEST(calls[0]["function"]["name"] == "get_weather");
  BOOST_TEST(json::parse(calls[0]["function"]["arguments"].get<std::string>()) == json({{"city", "Paris"}, {"days", 2}}));
  BOOST_TEST(j["choices"][0]["message"]["content"].is_null());
  body["stream"] = true;
  c.post("/v1/chat/completions", body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  json streamed;
  std::string content;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    const auto& d = e["choices"][0]["delta"];
    if (d.contains("tool_calls")) streamed = d["tool_calls"];
    content += d.value("content", "");
  }
  BOOST_TEST_REQUIRE(streamed.size() == 1u);
  BOOST_TEST(streamed[0]["function"]["arguments"] == calls[0]["function"]["arguments"]);
  BOOST_TEST(content.find("<tool_call>") == std::string::npos);  // held back, never sent as text
}

// Qwen3's JSON calls stream their arguments as the model writes them, on chat and on the
// Responses API: the pieces add up to the call the whole answer carries. The random model is held
// to such a call by a regex.
BOOST_AUTO_TEST_CASE(call_arguments_stream_as_they_are_written) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  const json want = {{"city", "Paris"}, {"days", 2}};
  const std::string regex = R"(<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris", "days": 2\}\}\n</tool_call>)";
  const json params = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}})");
  json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
               {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", params}}}}}},
               {"guided_regex", regex}, {"chat_template_kwargs", {{"enable_thinking", false}}}, {"max_tokens", 150},
               {"temperature", 0}, {"stream", true}};
  c.post("/v1/chat/completions", body.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  std::string args, name, finish;
  int pieces = 0;
  for (const auto& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    const auto& ch = e["choices"][0];
    for (const auto& tc : ch["delta"].value("tool_calls", json::array())) {
      if (tc["function"].contains("name")) name = tc["function"]["name"];
      args += tc["function"].value("arguments", "");
      ++pieces;
    }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  BOOST_TEST(name == "get_weather");
  BOOST_TEST(json::parse(args) == want, args);
  BOOST_TEST(pieces > 2);  // not whole at the end
  BOOST_TEST(finish == "tool_calls");
  body.erase("stream");
  c.post("/v1/chat/completions", body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto whole = json::parse(r.body)["choices"][0]["message"]["tool_calls"][0]["function"];
  BOOST_TEST(json::parse(whole["arguments"].get<std::string>()) == want);

  json resp = {{"input", "Weather?"}, {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", params}}}},
               {"guided_regex", regex}, {"reasoning", {{"effort", "none"}}}, {"max_output_tokens", 150},
               {"temperature", 0}, {"stream", true}};
  c.post("/v1/responses", resp.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  std::string deltas;
  int n = 0;
  json final_output;
  for (const auto& e : sse_events(r.body)) {
    if (e["type"] == "response.function_call_arguments.delta") {
      deltas += e["delta"].get<std::string>();
      ++n;
    }
    if (e["type"] == "response.completed") final_output = e["response"]["output"];
  }
  BOOST_TEST(n > 2);
  BOOST_TEST(json::parse(deltas) == want, deltas);
  BOOST_TEST_REQUIRE(final_output.size() == 1u, final_output.dump());
  BOOST_TEST(final_output[0]["arguments"] == deltas);
}

BOOST_AUTO_TEST_CASE(echo_scores_a_prompt_as_prompt_logprobs_do) {
  // What eval harnesses send to score a text: echo, logprobs, max_tokens 0.
  auto srv = start(test_config());
  const std::vector<int32_t> prompt = {17, 4, 99, 250, 3, 3, 1000};
  auto m = ids_request("m", prompt, 1);
  m.prompt_logprobs = 2;
  m.stream = false;
  client::client cl("127.0.0.1", srv->port());
  auto ref = cl.complete(m);
  BOOST_TEST_REQUIRE(ref.done.prompt_logprobs.has_value());
  http_client c(srv->http_port());
  c.post("/v1/completions", json({{"prompt", prompt}, {"echo", true}, {"logprobs", 2}, {"max_tokens", 0}}).dump());
  auto w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  auto j = json::parse(w.body);
  const auto& lp = j["choices"][0]["logprobs"];
  BOOST_TEST(logprob_ids(lp) == prompt, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(lp["token_logprobs"].size() == prompt.size());
  BOOST_TEST(lp["token_logprobs"][0].is_null());
  for (size_t i = 1; i < prompt.size(); ++i) {
    const auto& want = (*ref.done.prompt_logprobs)[i - 1];
    BOOST_TEST(lp["token_logprobs"][i].get<double>() == want.logprob);
    BOOST_TEST(lp["top_logprobs"][i].size() == want.top.size());
    BOOST_TEST(lp["top_logprobs"][i]["token_id:" + std::to_string(want.top[0].first)].get<double>() == want.top[0].second);
  }
  BOOST_TEST(j["usage"]["completion_tokens"] == 0);
  BOOST_TEST(j["usage"]["prompt_tokens"] == prompt.size());

  // vLLM's prompt_logprobs: the same values, each prompt token named with its rank (the protocol
  // carries both), first in its position's map; the rank agrees with the most likely tokens.
  c.post("/v1/completions", json({{"prompt", prompt}, {"prompt_logprobs", 2}, {"max_tokens", 1}}).dump());
  w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  const auto pl = json::parse(w.body)["choices"][0]["prompt_logprobs"];
  BOOST_TEST_REQUIRE(pl.size() == prompt.size());
  BOOST_TEST(pl[0].is_null());
  for (size_t i = 1; i < prompt.size(); ++i) {
    const auto& want = (*ref.done.prompt_logprobs)[i - 1];
    BOOST_TEST_REQUIRE(want.id.has_value());
    BOOST_TEST(*want.id == prompt[i]);
    const auto& mine = pl[i][std::to_string(prompt[i])];
    BOOST_TEST(mine["logprob"].get<double>() == want.logprob);
    BOOST_TEST(mine["rank"] == *want.rank);
    BOOST_TEST(mine["decoded_token"] == "token_id:" + std::to_string(prompt[i]));
    const int32_t in_top = want.top[0].first == prompt[i] ? 1 : want.top[1].first == prompt[i] ? 2 : 0;
    if (in_top) BOOST_TEST(*want.rank == in_top);
    else BOOST_TEST(*want.rank > 2);
    BOOST_TEST(pl[i][std::to_string(want.top[0].first)]["rank"] == 1);
  }
}

BOOST_AUTO_TEST_CASE(chat_gives_the_protocols_text) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  const json messages = {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hello there"}}}}}};
  // The same request over the msgpack protocol.
  wire::generate_request m;
  m.id = "m";
  m.kind = wire::prompt_kind::messages;
  m.messages = {{"system", "Be brief.", "", ""}, {"user", "Hello there", "", ""}};
  m.max_tokens = 12;
  m.ignore_eos = true;
  m.sampling.temperature = 0.0;
  m.separate_reasoning = true;
  client::client cl("127.0.0.1", srv->port());
  m.stream = false;
  auto ref = cl.complete(m);
  json body = {{"model", "e2e-full-vocab"}, {"messages", messages}, {"max_tokens", 12}, {"ignore_eos", true},
               {"temperature", 0}};
  http_client c(srv->http_port());
  c.post("/v1/chat/completions", body.dump());
  auto w = c.read();
  BOOST_TEST_REQUIRE(w.status == 200, w.body);
  auto j = json::parse(w.body);
  BOOST_TEST(j["object"] == "chat.completion");
  BOOST_TEST(j["choices"][0]["message"]["role"] == "assistant");
  BOOST_TEST(j["choices"][0]["message"]["content"] == ref.text);
  BOOST_TEST(j["choices"][0]["message"].value("reasoning_content", "") == ref.reasoning);
  BOOST_TEST(j["usage"]["completion_tokens"] == 12);

  body["stream"] = true;
  c.post("/v1/chat/completions", body.dump());  // the same keep-alive connection
  auto s = c.read();
  BOOST_TEST_REQUIRE(s.status == 200, s.body);
  std::string content, reasoning;
  bool role_first = false;
  auto ev = sse_events(s.body);
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i] == "[DONE]") continue;
    const auto& d = ev[i]["choices"][0]["delta"];
    if (i == 0) role_first = d.value("role", "") == "assistant";
    content += d.value("content", "");
    reasoning += d.value("reasoning_content", "");
  }
  BOOST_TEST(role_first);
  BOOST_TEST(content == ref.text);
  BOOST_TEST(reasoning == ref.reasoning);
}

// POST /v1/responses: a conversation given as Responses input items (instructions, a function
// call and its output) gets exactly the answer chat completions give the same turns, whole and
// streamed, with the same usage.
BOOST_AUTO_TEST_CASE(responses_give_the_chat_answer) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  // Key order matters (see weather_chat_body), so the bodies keep theirs.
  using ojson = nlohmann::ordered_json;
  const ojson params = weather_params();
  const ojson chat_body = weather_chat_body(true);
  c.post("/v1/chat/completions", chat_body.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto chat = json::parse(r.body);
  const std::string content = chat["choices"][0]["message"].value("content", "");
  const std::string reasoning = chat["choices"][0]["message"].value("reasoning_content", "");
  BOOST_TEST(!(content + reasoning).empty());

  ojson body = {{"model", "e2e-full-vocab"}, {"instructions", "Be brief."},
                {"input", ojson::parse(R"([{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "20 C"}])")},
                {"tools", {{{"type", "function"}, {"name", "weather"}, {"parameters", params}}}},
                {"max_output_tokens", 14}, {"ignore_eos", true}, {"temperature", 0}};
  c.post("/v1/responses", body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto whole = json::parse(r.body);
  BOOST_TEST(whole["object"] == "response");
  BOOST_TEST(whole["id"].get<std::string>().rfind("resp_", 0) == 0);
  BOOST_TEST(whole["status"] == "incomplete");  // ignore_eos: it ran to max_output_tokens
  BOOST_TEST(whole["incomplete_details"]["reason"] == "max_output_tokens");
  std::string text, thought;
  for (const auto& item : whole["output"]) {
    if (item["type"] == "message") text += item["content"][0]["text"].get<std::string>();
    if (item["type"] == "reasoning") thought += item["content"][0]["text"].get<std::string>();
  }
  BOOST_TEST(text == content);
  BOOST_TEST(thought == reasoning);
  BOOST_TEST(whole["usage"]["input_tokens"] == chat["usage"]["prompt_tokens"]);
  BOOST_TEST(whole["usage"]["output_tokens"] == chat["usage"]["completion_tokens"]);
  // The chat request's prompt blocks serve it: the turns render to the same prompt.
  BOOST_TEST(whole["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>() >=
             whole["usage"]["input_tokens"].get<int64_t>() - 16);

  body["stream"] = true;
  c.post("/v1/responses", body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(r.head.find("Content-Type: text/event-stream") != std::string::npos);
  BOOST_TEST(r.body.find("event: response.created\n") != std::string::npos);
  const auto ev = sse_events(r.body);
  BOOST_TEST_REQUIRE(!ev.empty());
  std::string streamed, streamed_thought;
  for (const auto& e : ev) {
    if (e["type"] == "response.output_text.delta") streamed += e["delta"].get<std::string>();
    if (e["type"] == "response.reasoning_text.delta") streamed_thought += e["delta"].get<std::string>();
  }
  BOOST_TEST(streamed == content);
  BOOST_TEST(streamed_thought == reasoning);
  BOOST_TEST(ev.back()["type"] == "response.completed");
  const auto without_ids = [](json items) {  // each response names its items after itself
    for (auto& item : items) item.erase("id");
    return items;
  };
  BOOST_TEST(without_ids(ev.back()["response"]["output"]) == without_ids(whole["output"]));
  BOOST_TEST(ev.back()["response"]["usage"]["output_tokens"] == whole["usage"]["output_tokens"]);
  // The same prompt: all of it but its last partial block comes from the prefix cache now.
  BOOST_TEST(ev.back()["response"]["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>() >=
             whole["usage"]["input_tokens"].get<int64_t>() - 16);

  // A refusal names the Responses API's field, in OpenAI's error shape.
  c.post("/v1/responses", R"({"input": "q", "prompt": {"id": "pmpt_1"}})");
  r = c.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "prompt");
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// Anthropic's Messages API: the same conversation as chat's (a tool call and its result as
// tool_use / tool_result blocks) renders to the same prompt and gets chat's answer, whole and
// streamed, its thinking as a thinking block; count_tokens counts that prompt; Anthropic's
// clients' x-api-key header carries the API key; errors come in Anthropic's shape.
BOOST_AUTO_TEST_CASE(anthropic_messages_give_the_chat_answer) {
  auto cfg = test_config();
  cfg.api_key = "sekrit";
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  using ojson = nlohmann::ordered_json;
  auto post = [&](const std::string& path, const std::string& body, const std::string& auth_header) {
    c.send("POST " + path + " HTTP/1.1\r\nHost: x\r\n" + auth_header + "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    return c.read();
  };
  const std::string bearer = "Authorization: Bearer sekrit\r\n", x_key = "x-api-key: sekrit\r\n";
  const ojson params = weather_params();
  const ojson chat_body = weather_chat_body(false);
  auto r = post("/v1/chat/completions", chat_body.dump(), bearer);
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto chat = json::parse(r.body);
  const std::string content = chat["choices"][0]["message"].value("content", "");
  const std::string reasoning = chat["choices"][0]["message"].value("reasoning_content", "");

  ojson body = {{"model", "e2e-full-vocab"}, {"max_tokens", 14}, {"temperature", 0}, {"system", "Be brief."},
                {"messages", ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "weather",
                        "input": {"city": "Paris"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "20 C"}]}])")},
                {"tools", {{{"name", "weather"}, {"input_schema", params}}}}};
  r = post("/v1/messages", body.dump(), x_key);
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto m = json::parse(r.body);
  BOOST_TEST(m["type"] == "message");
  BOOST_TEST(m["id"].get<std::string>().rfind("msg_", 0) == 0);
  std::string text, thought;
  for (const auto& b : m["content"]) {
    if (b["type"] == "text") text += b["text"].get<std::string>();
    if (b["type"] == "thinking") thought += b["thinking"].get<std::string>();
  }
  BOOST_TEST(text == content);
  BOOST_TEST(thought == reasoning);
  BOOST_TEST(m["stop_reason"] == (chat["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn"));
  const int64_t prompt = chat["usage"]["prompt_tokens"];
  BOOST_TEST(m["usage"]["input_tokens"].get<int64_t>() + m["usage"]["cache_read_input_tokens"].get<int64_t>() == prompt);
  BOOST_TEST(m["usage"]["cache_read_input_tokens"].get<int64_t>() >= prompt - 16);  // chat's prompt blocks served it

  body["stream"] = true;
  r = post("/v1/messages", body.dump(), bearer);
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(r.head.find("Content-Type: text/event-stream") != std::string::npos);
  BOOST_TEST(r.body.find("event: message_start\n") != std::string::npos);
  std::string streamed, streamed_thought, last;
  for (const auto& e : sse_events(r.body)) {
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "text_delta") streamed += e["delta"]["text"].get<std::string>();
    if (e["type"] == "content_block_delta" && e["delta"]["type"] == "thinking_delta")
      streamed_thought += e["delta"]["thinking"].get<std::string>();
    last = e["type"];
  }
  BOOST_TEST(streamed == text);
  BOOST_TEST(streamed_thought == thought);
  BOOST_TEST(last == "message_stop");

  body.erase("stream");
  body.erase("max_tokens");
  body.erase("temperature");
  r = post("/v1/messages/count_tokens", body.dump(), x_key);
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body) == json({{"input_tokens", prompt}}));

  r = post("/v1/messages", R"({"messages": [{"role": "user", "content": "q"}]})", x_key);
  BOOST_TEST(r.status == 400);
  BOOST_TEST(json::parse(r.body)["error"]["type"] == "invalid_request_error");
  BOOST_TEST(json::parse(r.body)["error"]["message"].get<std::string>().find("max_tokens") != std::string::npos);
  r = post("/v1/messages", body.dump(), "x-api-key: wrong\r\n");
  BOOST_TEST(r.status == 401);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));

  // vLLM's several --served-model-name: an alias (the name Claude Code asks for) is the model.
  auto named = test_config();
  named.served_model_name = "qwen3-coder,claude-haiku-4-5";
  auto alias_srv = start(named, full_vocab_dir, tokenizer_dir);
  BOOST_TEST(alias_srv->banner().find("also served as 'claude-haiku-4-5'") != std::string::npos, alias_srv->banner());
  http_client a(alias_srv->http_port());
  a.get("/v1/models");
  r = a.read();
  BOOST_TEST(r.body.find("\"claude-haiku-4-5\"") != std::string::npos, r.body);
  // OpenAI's models.retrieve: each served name, percent-decoded; another is 404 naming it.
  a.get("/v1/models/claude-haiku-4-5");
  r = a.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["id"] == "claude-haiku-4-5");
  BOOST_TEST(json::parse(r.body)["object"] == "model");
  a.get("/v1/models/qwen3%2Dcoder");
  r = a.read();
  BOOST_TEST(json::parse(r.body)["id"] == "qwen3-coder");
  a.get("/v1/models/claude-opus");
  r = a.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(json::parse(r.body)["error"]["code"] == "model_not_found");
  a.send("DELETE /v1/models/qwen3-coder HTTP/1.1\r\n\r\n");
  BOOST_TEST(a.read().status == 405);
  body["model"] = "claude-haiku-4-5";
  body["max_tokens"] = 2;
  a.post("/v1/messages", body.dump());
  r = a.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["model"] == "qwen3-coder");
  body["model"] = "claude-opus";
  a.post("/v1/messages", body.dump());
  r = a.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(json::parse(r.body)["error"]["type"] == "not_found_error");
}

// The Responses API's store: a response is kept (OpenAI's default `store: true`); GET gives it as
// it was sent; previous_response_id continues its conversation, which gives the same prompt (the
// prefix cache serves it) and the same answer as the whole conversation sent at once; DELETE
// forgets it; `store: false` keeps nothing; a server without a store says so.
BOOST_AUTO_TEST_CASE(responses_continue_a_stored_conversation) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  using ojson = nlohmann::ordered_json;
  const ojson tools = ojson::parse(R"([{"type": "function", "name": "weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  ojson first_body = {{"instructions", "Be brief."}, {"input", "Weather in Paris?"}, {"tools", tools},
                      {"max_output_tokens", 6}, {"ignore_eos", true}, {"temperature", 0}};
  c.post("/v1/responses", first_body.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const std::string first_text = r.body;
  const auto first = json::parse(r.body);
  const std::string first_id = first["id"];
  BOOST_TEST(first["store"] == true);
  BOOST_TEST(first_id.size() == 37u);  // resp_ and 128 random bits
  c.get("/v1/responses/" + first_id);
  r = c.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(r.body == first_text);  // byte for byte what the client got

  const ojson output = ojson::parse(first["output"].dump());
  const ojson call_output = {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "20 C"}};
  ojson second_body = {{"previous_response_id", first_id}, {"instructions", "Be brief."},
                       {"input", ojson::array({call_output})}, {"tools", tools}, {"max_output_tokens", 8},
                       {"ignore_eos", true}, {"temperature", 0}, {"stream", true}};
  c.post("/v1/responses", second_body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto ev = sse_events(r.body);
  BOOST_TEST_REQUIRE(!ev.empty());
  BOOST_TEST_REQUIRE(ev.back()["type"] == "response.completed");
  const auto second = ev.back()["response"];
  BOOST_TEST(second["previous_response_id"] == first_id);
  c.get("/v1/responses/" + second["id"].get<std::string>());
  r = c.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(json::parse(r.body) == second);  // a streamed response is kept as its last event had it

  // The whole conversation at once: the first's input, its output items, the call's output.
  ojson items = ojson::array({ojson{{"role", "user"}, {"content", "Weather in Paris?"}}});
  for (const auto& it : output) items.push_back(it);
  items.push_back(call_output);
  ojson at_once_body = {{"instructions", "Be brief."}, {"input", items}, {"tools", tools}, {"max_output_tokens", 8},
                        {"ignore_eos", true}, {"temperature", 0}, {"store", false}};
  c.post("/v1/responses", at_once_body.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto at_once = json::parse(r.body);
  BOOST_TEST(at_once["store"] == false);
  const auto without_ids = [](json its) {
    for (auto& item : its) item.erase("id");
    return its;
  };
  BOOST_TEST(without_ids(at_once["output"]) == without_ids(second["output"]));
  BOOST_TEST(at_once["usage"]["input_tokens"] == second["usage"]["input_tokens"]);
  BOOST_TEST(at_once["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>() >=
             at_once["usage"]["input_tokens"].get<int64_t>() - 16);  // the same prompt
  c.get("/v1/responses/" + at_once["id"].get<std::string>());
  BOOST_TEST(c.read().status == 404);  // store: false

  // DELETE forgets it: GET and previous_response_id are then 404.
  c.del("/v1/responses/" + first_id);
  r = c.read();
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["deleted"] == true);
  c.get("/v1/responses/" + first_id);
  BOOST_TEST(c.read().status == 404);
  c.post("/v1/responses", second_body.dump());
  r = c.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "previous_response_id");
  c.del("/v1/responses/" + first_id);
  BOOST_TEST(c.read().status == 404);
  c.post("/v1/responses/" + first_id, "{}");
  BOOST_TEST(c.read().status == 405);
  c.get("/v1/responses/" + first_id + "/input_items");
  BOOST_TEST(c.read().status == 404);  // deleted: its items too
  c.get("/v1/responses/" + second["id"].get<std::string>() + "/input_items?order=asc&limit=100");
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto listed = json::parse(r.body)["data"];
  // The second's input: the first's input and output (its conversation), then its own input.
  BOOST_TEST_REQUIRE(listed.size() == 1 + output.size() + 1);
  BOOST_TEST(listed[0]["content"][0]["text"] == "Weather in Paris?");
  BOOST_TEST(listed.back()["type"] == "function_call_output");
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));

  // No store: nothing kept, and previous_response_id says why.
  auto cfg = test_config();
  cfg.responses_store_bytes = 0;
  auto bare = start(cfg, full_vocab_dir, tokenizer_dir);
  http_client b(bare->http_port());
  first_body["max_output_tokens"] = 2;
  b.post("/v1/responses", first_body.dump());
  r = b.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["store"] == false);
  b.get("/v1/responses/" + json::parse(r.body)["id"].get<std::string>());
  BOOST_TEST(b.read().status == 404);
  second_body["previous_response_id"] = json::parse(r.body)["id"];
  b.post("/v1/responses", second_body.dump());
  r = b.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(r.body.find("responses_store_bytes = 0") != std::string::npos, r.body);
}

// OpenAI's Conversations API over HTTP: a conversation made with a first turn, continued by two
// responses naming it, holds every turn in order; each answer is the one to the whole conversation
// sent as input; the items are listed, one is deleted, then the conversation.
BOOST_AUTO_TEST_CASE(responses_continue_a_conversation) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  using ojson = nlohmann::ordered_json;
  c.post("/v1/conversations", R"({"metadata": {"user": "u1"}, "items": [{"role": "user", "content": "Hello"}]})");
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto conv = json::parse(r.body);
  const std::string id = conv["id"];
  BOOST_TEST(id.size() == 37u);  // conv_ and 128 random bits
  BOOST_TEST(conv["object"] == "conversation");
  ojson turn = {{"conversation", id}, {"input", "Weather in Paris?"}, {"max_output_tokens", 6},
                {"ignore_eos", true}, {"temperature", 0}, {"store", false}};
  c.post("/v1/responses", turn.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto first = json::parse(r.body);
  BOOST_TEST(first["conversation"]["id"] == id);
  turn["input"] = "And tomorrow?";
  turn["stream"] = true;  // the streamed one joins it too
  c.post("/v1/responses", turn.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);

  c.get("/v1/conversations/" + id + "/items?order=asc");
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto items = json::parse(r.body)["data"];
  BOOST_TEST_REQUIRE(items.size() == 5u, r.body);
  const std::vector<std::string> texts = {"Hello", "Weather in Paris?", first["output"].back()["content"][0]["text"],
                                          "And tomorrow?"};
  for (size_t i = 0; i < texts.size(); ++i) BOOST_TEST(items[i]["content"][0]["text"] == texts[i], i);
  BOOST_TEST(items[4]["role"] == "assistant");

  // The second answer is the one to the whole conversation sent as input.
  ojson whole = {{"input", ojson::array()}, {"max_output_tokens", 6}, {"ignore_eos", true}, {"temperature", 0},
                 {"store", false}};
  for (size_t i = 0; i < 4; ++i)
    whole["input"].push_back({{"role", items[i]["role"]}, {"content", items[i]["content"][0]["text"]}});
  c.post("/v1/responses", whole.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["output"].back()["content"][0]["text"] == items[4]["content"][0]["text"]);

  c.del("/v1/conversations/" + id + "/items/" + items[0]["id"].get<std::string>());
  r = c.read();
  BOOST_TEST(r.status == 200, r.body);
  c.del("/v1/conversations/" + id);
  r = c.read();
  BOOST_TEST(json::parse(r.body)["deleted"] == true);
  c.post("/v1/responses", turn.dump());
  r = c.read();
  BOOST_TEST(r.status == 404);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "conversation");
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// Responses' truncation "auto": a stored conversation continued past max_model_len (256 here)
// drops its oldest turns, so the answer is the one to the conversation that is left (the
// instructions and the new input); "disabled" (the default) refuses it as too long.
BOOST_AUTO_TEST_CASE(responses_truncate_a_conversation_that_outgrew_the_context) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  using ojson = nlohmann::ordered_json;
  std::string words;
  for (int i = 0; i < 60; ++i) words += " w" + std::to_string(i);
  std::string question = "And now";
  for (int i = 0; i < 40; ++i) question += " q" + std::to_string(i);
  const ojson first_body = {{"instructions", "Be brief."}, {"input", "Remember:" + words}, {"max_output_tokens", 8},
                            {"ignore_eos", true}, {"temperature", 0}};
  c.post("/v1/responses", first_body.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const std::string first_id = json::parse(r.body)["id"];
  ojson next = {{"previous_response_id", first_id}, {"instructions", "Be brief."}, {"input", question},
                {"max_output_tokens", 8}, {"ignore_eos", true}, {"temperature", 0}};
  c.post("/v1/responses", next.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 400, r.body);  // the whole conversation does not fit
  BOOST_TEST(json::parse(r.body)["error"]["code"] == "prompt_too_long");
  next["truncation"] = "auto";
  c.post("/v1/responses", next.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto truncated = json::parse(r.body);
  BOOST_TEST(truncated["truncation"] == "auto");
  const ojson alone = {{"instructions", "Be brief."}, {"input", question}, {"max_output_tokens", 8},
                       {"ignore_eos", true}, {"temperature", 0}, {"store", false}};
  c.post("/v1/responses", alone.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  const auto expected = json::parse(r.body);
  BOOST_TEST(truncated["usage"]["input_tokens"] == expected["usage"]["input_tokens"]);
  BOOST_TEST(truncated["output"].back()["content"][0]["text"] == expected["output"].back()["content"][0]["text"]);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// vLLM's /tokenize and /detokenize: a text gives the tokenizer's ids, chat messages the ids the
// msgpack protocol's tokenize gives (the same chat template), with each token's vocabulary string
// when asked; ids come back as the same text; bad ids and fields get OpenAI's error shape.
// POST /v1/embeddings: a list of texts comes back as OpenAI's list, in input order, each exactly
// troupe embed's embedding of that text alone; token-id input with dimensions; base64 is the
// float32 bytes; bad fields get OpenAI's error shape.
BOOST_AUTO_TEST_CASE(embeddings_give_troupe_embeds_vectors) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  const tokenizer tok(tokenizer_dir);
  static auto ck = load_checkpoint(full_vocab_dir);
  generator g(*ck);
  http_client c(srv->http_port());
  const std::vector<std::string> texts{"The quick brown fox", "jumps over", "the lazy dog, twice over"};
  c.post("/v1/embeddings", json{{"model", "e2e-full-vocab"}, {"input", texts}}.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  auto j = json::parse(r.body);
  BOOST_TEST(j["object"] == "list");
  BOOST_REQUIRE_EQUAL(j["data"].size(), texts.size());
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto ids = tok.encode_with_special_tokens(texts[i]);
    prompt_tokens += static_cast<int64_t>(ids.size());
    BOOST_TEST(j["data"][i]["object"] == "embedding");
    BOOST_TEST(j["data"][i]["index"] == i);
    BOOST_TEST(j["data"][i]["embedding"].get<std::vector<float>>() == g.embed(ids, embedding_options{}),
               boost::test_tools::per_element());
  }
  BOOST_TEST(j["usage"]["prompt_tokens"] == prompt_tokens);
  BOOST_TEST(j["usage"]["total_tokens"] == prompt_tokens);

  c.post("/v1/embeddings", json{{"model", "e2e-full-vocab"}, {"input", {14990, 1879}}, {"dimensions", 4},
                                {"encoding_format", "base64"}}.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  j = json::parse(r.body);
  BOOST_REQUIRE_EQUAL(j["data"].size(), 1u);
  const std::string b64 = j["data"][0]["embedding"];
  BOOST_REQUIRE_EQUAL(b64.size(), 24u);  // 16 bytes
  std::string bytes;
  const std::string table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < b64.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char ch = b64[i + k];
      if (ch == '=') ++pad;
      v = (v << 6) | (ch == '=' ? 0u : static_cast<uint32_t>(table.find(ch)));
    }
    bytes += static_cast<char>(v >> 16);
    if (pad < 2) bytes += static_cast<char>((v >> 8) & 255);
    if (pad < 1) bytes += static_cast<char>(v & 255);
  }
  BOOST_REQUIRE_EQUAL(bytes.size(), 16u);
  std::vector<float> got(4);
  std::memcpy(got.data(), bytes.data(), 16);
  BOOST_TEST(got == g.embed({14990, 1879}, embedding_options{true, 4}), boost::test_tools::per_element());

  c.post("/v1/embeddings", json{{"model", "e2e-full-vocab"}, {"input", "x"}, {"encoding_format", "int8"}}.dump());
  r = c.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body.find("encoding_format") != std::string::npos, r.body);
  c.post("/v1/embeddings", json{{"model", "e2e-full-vocab"}, {"input", "x"}, {"dimensions", 100000}}.dump());
  r = c.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body.find("dimensions") != std::string::npos, r.body);
  c.post("/v1/embeddings", json{{"model", "e2e-full-vocab"}}.dump());
  r = c.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body.find("'input'") != std::string::npos, r.body);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// vLLM's --default-chat-template-kwargs '{"enable_thinking": false}': a chat that says nothing
// renders with Qwen3's empty think block (its answer starts at once), one that asks to think does
// not, and a chat completion's prompt is the tokenized one. With --trust-request-chat-template a
// request's own template renders, with the defaults' variables.
BOOST_AUTO_TEST_CASE(default_chat_template_kwargs_turn_thinking_off) {
  auto cfg = test_config();
  cfg.default_chat_template_kwargs = R"({"enable_thinking": false, "mark": "!"})";
  cfg.trust_request_chat_template = true;
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  http_client c(srv->http_port());
  auto prompt_of = [&](json body) {
    body["messages"] = json::array({{{"role", "user"}, {"content", "Hi"}}});
    body["return_token_strs"] = true;
    c.post("/tokenize", body.dump());
    auto r = c.read();
    BOOST_TEST_REQUIRE(r.status == 200, r.body);
    std::string text;
    const auto j = json::parse(r.body);  // named: a range-for over a temporary's member would dangle
    for (const auto& s : j["token_strs"]) text += s.get<std::string>();
    return text;
  };
  const std::string plain = prompt_of(json::object());
  BOOST_TEST(plain.find("<think>") != std::string::npos, plain);  // the empty block: thinking off
  const std::string thinking = prompt_of({{"chat_template_kwargs", {{"enable_thinking", true}}}});
  BOOST_TEST(thinking.find("<think>") == std::string::npos, thinking);
  BOOST_TEST(prompt_of({{"chat_template_kwargs", {{"enable_thinking", false}}}}) == plain);
  BOOST_TEST(prompt_of({{"chat_template", "{{ messages[0].content }}{{ mark }}{{ enable_thinking }}"}}) == "Hi!False");
  c.post("/v1/chat/completions", json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                      {"max_tokens", 1}, {"return_token_ids", true}}.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  c.post("/tokenize", json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}}.dump());
  auto t = c.read();
  BOOST_TEST(json::parse(r.body)["prompt_token_ids"] == json::parse(t.body)["tokens"]);
}

BOOST_AUTO_TEST_CASE(tokenize_and_detokenize) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  const tokenizer tok(tokenizer_dir);
  http_client c(srv->http_port());
  const std::string text = "Hello there, 世界!\n  spaces";
  c.post("/tokenize", json{{"model", "e2e-full-vocab"}, {"prompt", text}, {"return_token_strs", true}}.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  auto j = json::parse(r.body);
  const auto ids = tok.encode(text);
  BOOST_TEST(j["tokens"].get<std::vector<int32_t>>() == ids, boost::test_tools::per_element());
  BOOST_TEST(j["count"] == ids.size());
  BOOST_TEST(j["max_model_len"].get<int64_t>() > 0);
  BOOST_REQUIRE_EQUAL(j["token_strs"].size(), ids.size());
  BOOST_TEST(j["token_strs"][1] == "Ġthere");  // tokenizer.json's ByteLevel spelling, as Hugging Face's
  std::string joined;
  for (const auto& s : j["token_strs"]) joined += s.get<std::string>();
  BOOST_TEST(joined.find("Ġ") != std::string::npos);

  // Chat messages: the msgpack protocol's tokenize of the same turns, the template applied.
  wire::tokenize_request m;
  m.id = "t";
  m.kind = wire::prompt_kind::messages;
  m.messages = {{"system", "Be brief.", "", ""}, {"user", "Hi", "", ""}};
  m.enable_thinking = false;
  client::client cl("127.0.0.1", srv->port());
  const auto chat_ids = cl.tokenize(m);
  c.post("/tokenize", json{{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
                           {"add_generation_prompt", true}, {"chat_template_kwargs", {{"enable_thinking", false}}}}
                          .dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  j = json::parse(r.body);
  BOOST_TEST(j["tokens"].get<std::vector<int32_t>>() == chat_ids, boost::test_tools::per_element());
  BOOST_TEST(j["token_strs"].is_null());
  BOOST_TEST(tok.decode(chat_ids).find("<|im_start|>assistant") != std::string::npos);

  c.post("/detokenize", json{{"tokens", ids}}.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["prompt"] == text);

  // Assistant prefill (vLLM's continue_final_message): the ids transformers renders, and a chat
  // completion continuing it prompts with exactly those.
  std::ifstream cont(TROUPE_TEST_DATA_DIR "/tokenizer/continue_final_message_cases.json");
  const auto prefill = json::parse(cont)[0];
  BOOST_TEST_REQUIRE(prefill["name"] == "prefill_json");
  c.post("/tokenize", json{{"messages", prefill["messages"]}, {"add_generation_prompt", false},
                           {"continue_final_message", true}}.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["tokens"].get<std::vector<int32_t>>() == prefill["ids"].get<std::vector<int32_t>>(),
             boost::test_tools::per_element());
  c.post("/v1/chat/completions", json{{"messages", prefill["messages"]}, {"add_generation_prompt", false},
                                      {"continue_final_message", true}, {"max_tokens", 2}, {"temperature", 0}}.dump());
  r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["usage"]["prompt_tokens"] == prefill["ids"].size());

  struct bad {
    const char* path;
    std::string body;
    int status;
    const char* code;
    const char* param;
  };
  for (const auto& b : {bad{"/detokenize", R"({"tokens": [1, 99999999]})", 400, "invalid_value", "tokens"},
                        bad{"/detokenize", R"({"tokens": [1, -2]})", 400, "invalid_value", "tokens[1]"},
                        bad{"/detokenize", R"({"ids": [1]})", 400, "unknown_field", "ids"},
                        bad{"/tokenize", R"({"prompt": "a", "add_generation_prompt": true})", 400, "unknown_field", "add_generation_prompt"},
                        bad{"/tokenize", R"({"messages": [{"role": "user", "content": "a"}], "continue_final_message": true})", 400,
                            "invalid_value", ""},
                        bad{"/tokenize", R"({"prompt": "a", "model": "gpt-4"})", 404, "model_not_found", "model"},
                        bad{"/tokenize", R"({})", 400, "missing_field", "prompt"},
                        bad{"/tokenize", R"({"prompt": ""})", 400, "invalid_value", ""}}) {
    c.post(b.path, b.body);
    r = c.read();
    BOOST_TEST(r.status == b.status, b.body << ": " << r.body);
    const auto e = json::parse(r.body)["error"];
    BOOST_TEST(e["code"] == b.code, b.body << ": " << r.body);
    if (*b.param) BOOST_TEST(e["param"] == b.param, b.body << ": " << r.body);
  }
  c.send("GET /tokenize HTTP/1.1\r\n\r\n");
  BOOST_TEST(c.read().status == 405);
  // The connection still answers after every refusal.
  c.post("/tokenize", json{{"prompt", "ok"}}.dump());
  BOOST_TEST(c.read().status == 200);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered_in_order) {
  auto srv = start(test_config());
  http_client c(srv->http_port());
  auto a = ids_request("a", {1, 2, 3}, 9), b = ids_request("b", {4, 5}, 2);
  std::string both;
  for (const auto& r : {a, b}) {
    auto j = completion_body(r, false);
    both += "POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(j.size()) + "\r\n\r\n" + j;
  }
  c.send(both + "GET /v1/models HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
  auto ra = c.read(), rb = c.read(), rm = c.read(), rp = c.read();
  BOOST_TEST_REQUIRE(ra.status == 200, ra.body);
  BOOST_TEST_REQUIRE(rb.status == 200, rb.body);
  BOOST_TEST(logprob_ids(json::parse(ra.body)["choices"][0]["logprobs"]) == reference(tiny_dense(), a), boost::test_tools::per_element());
  BOOST_TEST(logprob_ids(json::parse(rb.body)["choices"][0]["logprobs"]) == reference(tiny_dense(), b), boost::test_tools::per_element());
  auto models = json::parse(rm.body);
  BOOST_TEST(models["data"][0]["id"] == "tiny-dense");
  BOOST_TEST(models["data"][0]["max_model_len"] == 256);
  // Prometheus text on the API's port too, where vLLM serves it; both requests are counted.
  BOOST_TEST(rp.status == 200);
  BOOST_TEST(rp.body.find("troupe:generation_tokens_total{model_name=\"tiny-dense\"} 11\n") != std::string::npos, rp.body.substr(0, 300));
}

BOOST_AUTO_TEST_CASE(many_pipelined_requests_refused_at_once) {
  // Each asks for more completions than the connection may run, so the gateway answers it while
  // reading it: 3,000 of them in a row must neither recurse nor reorder.
  auto c = test_config();
  c.max_requests_per_connection = 1;
  auto srv = start(c);
  const std::string body = R"({"prompt": [1], "n": 2})";
  std::string one = "POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::string all;
  for (int i = 0; i < 3000; ++i) all += one;
  http_client h(srv->http_port());
  h.send(all + "GET /health HTTP/1.1\r\n\r\n");
  for (int i = 0; i < 3000; ++i) {
    auto r = h.read();
    if (r.status != 429) BOOST_FAIL("response " << i << ": " << r.status << " " << r.body);
  }
  BOOST_TEST(h.read().status == 200);
}

// vLLM's GET /version and SageMaker's /ping (GET or POST, as /health), outside the API key.
BOOST_AUTO_TEST_CASE(version_and_ping) {
  auto c = test_config();
  c.api_key = "k";
  auto srv = start(c);
  http_client h(srv->http_port());
  h.send("GET /version HTTP/1.1\r\n\r\n");
  auto v = h.read();
  BOOST_TEST_REQUIRE(v.status == 200, v.body);
  BOOST_TEST(json::parse(v.body)["version"] == std::string(troupe::version()));
  BOOST_TEST(!troupe::version().empty());
  for (const char* method : {"GET", "POST"}) {
    h.send(std::string(method) + " /ping HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    auto p = h.read();
    BOOST_TEST(p.status == 200, method << ": " << p.body);
    BOOST_TEST(json::parse(p.body)["status"] == "ok");
  }
  h.send("DELETE /ping HTTP/1.1\r\n\r\n");
  BOOST_TEST(h.read().status == 405);
  h.send("POST /version HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  BOOST_TEST(h.read().status == 405);
}

// SageMaker's POST /invocations, as vLLM serves it: each body is answered as the endpoint its
// fields name (a completion exactly as /v1/completions answers it, embeddings as /v1/embeddings),
// behind the API key; a body naming none, or another method, is refused.
BOOST_AUTO_TEST_CASE(invocations_route_by_the_body) {
  auto c = test_config();
  c.api_key = "k";
  auto srv = start(c);
  http_client h(srv->http_port());
  auto post = [&](const std::string& path, const std::string& body, const std::string& auth = "Authorization: Bearer k\r\n") {
    h.send("POST " + path + " HTTP/1.1\r\n" + auth + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    return h.read();
  };
  const std::string completion = R"({"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "ignore_eos": true})";
  auto direct = post("/v1/completions", completion);
  auto routed = post("/invocations", completion);
  BOOST_TEST_REQUIRE(routed.status == 200, routed.body);
  BOOST_TEST(json::parse(routed.body)["object"] == "text_completion");
  BOOST_TEST(json::parse(routed.body)["choices"] == json::parse(direct.body)["choices"]);
  const std::string embed = R"({"input": [[1, 2, 3]]})";
  direct = post("/v1/embeddings", embed);
  routed = post("/invocations", embed);
  BOOST_TEST_REQUIRE(routed.status == 200, routed.body);
  BOOST_TEST(json::parse(routed.body)["data"] == json::parse(direct.body)["data"]);
  routed = post("/invocations", R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})");
  BOOST_TEST(routed.status == 400);  // chat: this model has no tokenizer, as /v1/chat/completions says
  BOOST_TEST(routed.body.find("tokenizer") != std::string::npos, routed.body);
  routed = post("/invocations", R"({"max_tokens": 1})");
  BOOST_TEST(routed.status == 400);
  BOOST_TEST(routed.body.find("'messages' (chat), 'prompt' (completions)") != std::string::npos, routed.body);
  BOOST_TEST(post("/invocations", "not json").status == 400);
  BOOST_TEST(post("/invocations", completion, "").status == 401);  // the API key guards it
  h.send("GET /invocations HTTP/1.1\r\nAuthorization: Bearer k\r\n\r\n");
  BOOST_TEST(h.read().status == 405);
}

BOOST_AUTO_TEST_CASE(bad_requests_get_openai_errors) {
  auto c = test_config();
  c.max_frame_bytes = 4096;
  auto srv = start(c);
  struct bad_case {
    std::string request;
    int status;
    const char* code;
  };
  auto post = [](const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const bad_case cases[] = {
      {post("/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": 2,"), 400, "malformed"},
      {post("/v1/completions", R"({"model": "gpt-4o", "prompt": [1]})"), 404, "model_not_found"},
      {post("/v1/completions", R"({"prompt": [1], "max_tokens": 0})"), 400, "invalid_value"},
      {post("/v1/completions", R"({"prompt": [1], "top_p": 2})"), 400, "invalid_value"},
      {post("/v1/completions", R"({"prompt": [1], "frobnicate": true})"), 400, "unknown_field"},
      {post("/v1/completions", R"({"prompt": "text needs a tokenizer"})"), 400, "unsupported"},
      {post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})"), 400, "unsupported"},
      {post("/v1/completions", json({{"prompt", std::vector<int32_t>(300, 1)}}).dump()), 400, "prompt_too_long"},
      {post("/v1/completions", json({{"prompt", std::vector<int32_t>(300, 1)}, {"stream", true}}).dump()), 400, "prompt_too_long"},
      {"GET /v1/completions HTTP/1.1\r\n\r\n", 405, "method_not_allowed"},
      {"GET /v2/anything HTTP/1.1\r\n\r\n", 404, "not_found"},
  };
  http_client h(srv->http_port());  // all on one keep-alive connection: none of them closes it
  for (const auto& bc : cases) {
    BOOST_TEST_CONTEXT(bc.request.substr(0, 120)) {
      h.send(bc.request);
      auto r = h.read();
      BOOST_TEST(r.status == bc.status);
      auto j = json::parse(r.body);
      BOOST_TEST(j["error"]["code"] == bc.code);
      BOOST_TEST(!j["error"]["message"].get<std::string>().empty());
    }
  }
  // A body over max_frame_bytes and a broken request line end the connection after the answer.
  http_client big(srv->http_port());
  big.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
  auto r = big.read();
  BOOST_TEST(r.status == 413);
  BOOST_TEST(r.closed);
  BOOST_TEST(big.closed_by_server());
  http_client junk(srv->http_port());
  junk.send("\x01\x02 nonsense\r\n\r\n");
  BOOST_TEST(junk.read().status == 400);
  BOOST_TEST(junk.closed_by_server());
  // Connection: close is honoured.
  http_client once(srv->http_port());
  once.send("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
  BOOST_TEST(once.read().status == 200);
  BOOST_TEST(once.closed_by_server());
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(a_client_leaving_mid_stream_frees_its_blocks) {
  auto srv = start(test_config());
  {
    http_client c(srv->http_port());
    c.post("/v1/completions", completion_body(ids_request("long", {1, 2, 3, 4}, 240), true));
    c.read_some(200);  // the head and some events: the sequence is running
    BOOST_TEST(metric(*srv, "num_requests_running") == 1);
  }  // closes the socket
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(shutdown_ends_a_stream_with_abort_and_done) {
  auto cfg = test_config();
  cfg.max_model_len = 4096;  // a stream far longer than the shutdown's grace
  auto srv = start(cfg);
  http_client c(srv->http_port());
  c.post("/v1/completions", json({{"prompt", {1, 2, 3}}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true},
                                  {"logprobs", 0}}).dump());
  c.read_some(300);  // streaming
  std::jthread stopper([&] { srv->shutdown(std::chrono::milliseconds(50)); });
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200);
  auto ev = sse_events(r.body);
  BOOST_TEST_REQUIRE(ev.size() >= 3u);
  BOOST_TEST(ev.back() == "[DONE]");
  BOOST_TEST(ev[ev.size() - 2]["choices"][0]["finish_reason"] == "abort");
  BOOST_TEST(c.closed_by_server());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(e2e_openai_keys)

// vLLM's request ids: an X-Request-Id header names the response (cmpl-ID), else the body's
// request_id; with request_id_headers every answer carries X-Request-Id back, the client's or the
// one made for the request (which then names the response too); a bad one is 400 naming it.
BOOST_AUTO_TEST_CASE(request_ids_name_the_responses) {
  auto cfg = test_config();
  cfg.request_id_headers = true;
  auto srv = start(cfg);
  http_client h(srv->http_port());
  auto post = [&](const std::string& headers, const std::string& body) {
    h.send("POST /v1/completions HTTP/1.1\r\n" + headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           body);
    return h.read();
  };
  auto echoed = [](const http_reply& r) -> std::string {
    const auto at = r.head.find("\r\nX-Request-Id: ");
    if (at == std::string::npos) return "";
    const auto from = at + 16;
    return r.head.substr(from, r.head.find("\r\n", from) - from);
  };
  const std::string plain = R"({"prompt": [1, 2], "max_tokens": 2})";
  const std::string with_field = R"({"prompt": [1, 2], "max_tokens": 2, "request_id": "from-body"})";
  auto r = post("X-Request-Id: trace-1\r\n", plain);
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["id"] == "cmpl-trace-1");
  BOOST_TEST(echoed(r) == "trace-1");
  r = post("", with_field);
  BOOST_TEST(json::parse(r.body)["id"] == "cmpl-from-body");
  BOOST_TEST(!echoed(r).empty());
  r = post("x-request-id: trace-2\r\n", with_field);  // the header wins, as vLLM's
  BOOST_TEST(json::parse(r.body)["id"] == "cmpl-trace-2");
  BOOST_TEST(echoed(r) == "trace-2");
  r = post("", plain);
  BOOST_TEST(json::parse(r.body)["id"] == "cmpl-" + echoed(r));  // the made one names both
  r = post("X-Request-Id: s-1\r\n", R"({"prompt": [1, 2], "max_tokens": 3, "stream": true})");
  BOOST_TEST(echoed(r) == "s-1");
  for (const auto& e : sse_events(r.body))
    if (e != "[DONE]") BOOST_TEST(e["id"] == "cmpl-s-1");
  r = post("X-Request-Id: two words\r\n", plain);
  BOOST_TEST(r.status == 400);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "X-Request-Id");
  r = post("", R"({"prompt": [1, 2], "request_id": ""})");
  BOOST_TEST(r.status == 400);
  BOOST_TEST(json::parse(r.body)["error"]["param"] == "request_id");
  h.send("GET /health HTTP/1.1\r\nX-Request-Id: probe-7\r\n\r\n");
  r = h.read();
  BOOST_TEST(echoed(r) == "probe-7");

  auto quiet = start(test_config());  // off by default: the id still names the response
  http_client q(quiet->http_port());
  const std::string body = R"({"prompt": [1, 2], "max_tokens": 2})";
  q.send("POST /v1/completions HTTP/1.1\r\nX-Request-Id: t-9\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body);
  r = q.read();
  BOOST_TEST(json::parse(r.body)["id"] == "cmpl-t-9");
  BOOST_TEST(echoed(r).empty());
}

BOOST_AUTO_TEST_CASE(an_api_key_guards_v1_and_the_model_aliases) {
  auto c = test_config();
  c.api_key = "s3cret-key";
  auto srv = start(c);
  BOOST_TEST(srv->banner().find("API key required") != std::string::npos);
  const std::string body = R"({"prompt": [1, 2], "max_tokens": 2})";
  auto post = [&](const std::string& auth) {
    return "POST /v1/completions HTTP/1.1\r\n" + auth + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  http_client h(srv->http_port());
  for (const std::string auth : {"", "Authorization: Bearer s3cret-kez\r\n", "Authorization: s3cret-key\r\n",
                                 "Authorization: Bearer s3cret-key-and-more\r\n", "Authorization: Bearer \r\n"}) {
    h.send(post(auth));
    auto r = h.read();
    BOOST_TEST(r.status == 401, auth);
    BOOST_TEST(json::parse(r.body)["error"]["code"] == "invalid_api_key");
  }
  h.send("GET /v1/models HTTP/1.1\r\n\r\n");
  BOOST_TEST(h.read().status == 401);
  h.send(post("authorization: Bearer s3cret-key\r\n"));  // header names in any case
  auto ok = h.read();
  BOOST_TEST(ok.status == 200, ok.body);
  h.send("GET /health HTTP/1.1\r\n\r\n");
  BOOST_TEST(h.read().status == 200);
  h.send("GET /metrics HTTP/1.1\r\n\r\n");
  BOOST_TEST(h.read().status == 200);
  // The aliases outside /v1 that run the model are guarded too.
  const std::string rerank = R"({"query": "q", "documents": ["d"]})";
  for (const char* path : {"/rerank", "/v2/rerank", "/score", "/classify"}) {
    h.send(std::string("POST ") + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(rerank.size()) + "\r\n\r\n" + rerank);
    BOOST_TEST(h.read().status == 401, path);
  }
}

// CORS, as vLLM's middleware: a listed origin's preflight is answered before the API key is asked
// for; its requests' answers (whole, streamed, 401 and 404 alike) carry the origin, so a browser
// page can read them; another origin's get no CORS lines (the browser withholds them).
BOOST_AUTO_TEST_CASE(browsers_on_listed_origins_may_call_the_api) {
  auto c = test_config();
  c.api_key = "s3cret-key";
  c.allowed_origins = R"(["https://app.example"])";
  auto srv = start(c);
  http_client h(srv->http_port());
  const std::string allow = "access-control-allow-origin: https://app.example";
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  h.send("OPTIONS /v1/chat/completions HTTP/1.1\r\nOrigin: https://app.example\r\n"
         "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n\r\n");
  auto r = h.read();
  BOOST_TEST(r.status == 200, r.head);
  BOOST_TEST(lower(r.head).find(allow) != std::string::npos, r.head);
  BOOST_TEST(lower(r.head).find("access-control-allow-headers: authorization, content-type") != std::string::npos, r.head);
  const std::string body = R"({"prompt": [1, 2], "max_tokens": 2})";
  auto post = [&](const std::string& origin, const std::string& auth, const std::string& b) {
    return "POST /v1/completions HTTP/1.1\r\nOrigin: " + origin + "\r\n" + auth +
           "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  };
  const std::string key = "Authorization: Bearer s3cret-key\r\n";
  h.send(post("https://app.example", key, body));
  r = h.read();
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(lower(r.head).find(allow) != std::string::npos, r.head);
  h.send(post("https://app.example", key, R"({"prompt": [1, 2], "max_tokens": 2, "stream": true})"));
  r = h.read();
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(lower(r.head).find(allow) != std::string::npos, r.head);  // the streamed head too
  h.send(post("https://app.example", "", body));
  r = h.read();
  BOOST_TEST(r.status == 401);
  BOOST_TEST(lower(r.head).find(allow) != std::string::npos, r.head);
  h.send(post("https://evil.example", key, body));
  r = h.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(lower(r.head).find("access-control") == std::string::npos, r.head);
  h.send("OPTIONS /v1/completions HTTP/1.1\r\nOrigin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
  r = h.read();
  BOOST_TEST(r.status == 400);
  BOOST_TEST(r.body == "Disallowed CORS origin");
  h.send("GET /health HTTP/1.1\r\n\r\n");  // no Origin: no CORS lines, as before
  r = h.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(lower(r.head).find("access-control") == std::string::npos, r.head);

  // By default CORS is off: no page on another origin can read a loopback server's answers.
  auto off = start(test_config());
  http_client o(off->http_port());
  o.send("OPTIONS /v1/completions HTTP/1.1\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n\r\n");
  r = o.read();
  BOOST_TEST(r.status == 405);
  BOOST_TEST(lower(r.head).find("access-control") == std::string::npos, r.head);
  o.send(post("https://app.example", "", body));
  r = o.read();
  BOOST_TEST(r.status == 200);
  BOOST_TEST(lower(r.head).find("access-control") == std::string::npos, r.head);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(e2e_openai_ports)

// --chat-template (model.chat_template): chat prompts render with the given template, not the
// model's, with the model's special tokens; one the engine cannot run stops the start naming it.
BOOST_AUTO_TEST_CASE(a_chat_template_given_replaces_the_models) {
  auto cfg = test_config();
  cfg.chat_template = "[{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}{% endfor %}]";
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  const tokenizer tok(tokenizer_dir);
  http_client c(srv->http_port());
  c.post("/tokenize", json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}.dump());
  auto r = c.read();
  BOOST_TEST_REQUIRE(r.status == 200, r.body);
  BOOST_TEST(json::parse(r.body)["tokens"].get<std::vector<int32_t>>() == tok.encode("[user: Hi<|im_end|>]"),
             boost::test_tools::per_element());
  auto bad = test_config();
  bad.chat_template = "{% include 'other.jinja' %}";
  try {
    start(bad, full_vocab_dir, tokenizer_dir);
    BOOST_FAIL("a server started with a template it cannot run");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("model.chat_template (--chat-template): the chat template given inline: chat template line 1: "
                         "unsupported tag 'include'") != std::string::npos, what);
  }
}

BOOST_AUTO_TEST_CASE(a_port_in_use_is_a_clear_start_error) {
  auto a = start(test_config());
  auto busy_http = test_config();
  busy_http.http_port = a->http_port();
  try {
    start(busy_http);
    BOOST_FAIL("a second server bound a port in use");
  } catch (const std::exception& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("cannot listen on 127.0.0.1:" + std::to_string(a->http_port()) +
                         " for the OpenAI-compatible API") != std::string::npos, what);
  }
  auto off = test_config();
  off.http_port = -1;
  auto b = start(off);
  BOOST_TEST(b->http_port() == 0);
  BOOST_TEST(b->banner().find("OpenAI") == std::string::npos);
  BOOST_TEST(a->banner().find("OpenAI-compatible API on http://127.0.0.1:" + std::to_string(a->http_port()) + "/v1") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
