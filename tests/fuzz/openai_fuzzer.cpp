// libFuzzer harness for the OpenAI-compatible HTTP API's input side. The first byte picks:
//   0: HTTP/1.1 bytes cut at input-chosen points: every request parsed has the body its
//      Content-Length declared and stays within the limits, or the parser reports an error status;
//      its CORS lines (and a preflight's answer) are well-formed header lines;
//   1/2: a /v1/chat/completions or /v1/completions body: a generate request or an OpenAI error
//      (status 400/404, a message, JSON error body); an accepted one, answered with text events
//      made from the input and a done per completion, gives parseable JSON (every SSE event, or
//      the whole body) and completes;
//   3: a /tokenize or /detokenize body: a request (whose answer is JSON) or an OpenAI error;
//   4: a /v1/responses body: a generate request or an OpenAI error; an accepted one, answered
//      with thinking, text and a done made from the input, gives a parseable response (whole, or
//      every event of the stream, the last response.completed or response.failed);
//   5: a /v1/load_lora_adapter or /v1/unload_lora_adapter body: names and a path, or an error;
//   6: a /v1/messages (or count_tokens) body: a generate (or tokenize) request or an Anthropic
//      error; an accepted one, answered with thinking, text, a call and a done made from the
//      input, gives a parseable message (whole, or every event, the last message_stop or error);
//   7: a /v1/conversations call (method and path from the input's first line, then the body):
//      200, 400, 404 or 405 with a JSON body, and the store stays within its bound.
// Case 4 keeps a conversation "conv_0" too: a response naming it reads and extends it.
// Not part of ctest (it runs until stopped): tools/fuzz.sh openai.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/cors.hpp"
#include "runtime/wire/http.hpp"
#include "runtime/wire/openai.hpp"
#include "runtime/wire/openai_lora.hpp"
#include "runtime/wire/anthropic_messages.hpp"
#include "runtime/wire/background_response.hpp"
#include "runtime/wire/openai_conversations.hpp"
#include "runtime/wire/openai_responses.hpp"
#include "runtime/wire/openai_tokenize.hpp"

namespace {

using namespace troupe::wire;

void check(bool ok) {
  if (!ok) std::abort();
}

// CORS lines for any parsed request, under an echoing and a listing policy: "Name: value\r\n"
// lines whose values hold no CR or LF (nothing a request sends can split the answer's head), and
// a preflight answer is 200 or 400 without throwing.
void check_cors(const http_request& r) {
  cors_policy echo, listed;
  echo.origins = {"*"};
  echo.allow_credentials = true;
  listed.origins = {"https://a.example"};
  listed.methods = {"GET", "POST"};
  listed.headers = {"authorization"};
  auto well_formed = [](const std::string& lines) {
    size_t at = 0;
    while (at < lines.size()) {
      const size_t end = lines.find("\r\n", at);
      check(end != std::string::npos);
      const std::string_view line(lines.data() + at, end - at);
      check(line.find(": ") != std::string_view::npos);
      check(line.find_first_of("\r\n") == std::string_view::npos);
      at = end + 2;
    }
  };
  for (const cors_policy* p : {&echo, &listed}) {
    well_formed(cors_headers(*p, r));
    if (is_cors_preflight(r)) {
      const auto a = answer_cors_preflight(*p, r);
      check(a.status == 200 || a.status == 400);
      well_formed(a.headers);
    }
  }
}

void fuzz_http(std::string_view in) {
  constexpr size_t max_head = 512, max_body = 256;
  http_request_parser p(max_head, max_body);
  size_t pos = 0, step = 1;
  for (;;) {
    http_request r;
    auto s = p.next(r);
    if (s == http_request_parser::status::request) {
      check(r.body.size() <= max_body);
      const auto* cl = r.header("content-length");
      check(cl ? std::stoul(*cl) == r.body.size() : r.body.empty());
      check(!r.target.empty() && r.target[0] == '/');
      check_cors(r);
      for (const char* name : {"limit", "order", "after"})  // a decoded value is never longer than its text
        if (auto v = r.query(name)) check(v->size() <= r.target.size());
      const auto q = openai::parse_stream_query(r.query("stream"), r.query("starting_after"));
      check(q.error ? q.error->status == 400 && !q.error->param.empty() : q.starting_after >= -1);
      continue;
    }
    if (s == http_request_parser::status::error) {
      check(p.error_status() >= 400 && !p.error_message().empty());
      return;
    }
    if (s == http_request_parser::status::send_continue) continue;
    if (pos >= in.size()) return;
    check(p.buffered_bytes() <= max_head + max_body + 64 + in.size());
    step = 1 + static_cast<unsigned char>(in[pos]) % 64;
    p.feed(in.substr(pos, step));
    pos += step;
  }
}

// The data of each server-sent event in a response (each must end with a blank line).
std::vector<std::string> sse_data(const std::string& out) {
  std::vector<std::string> data;
  size_t at = 0;
  while ((at = out.find("data: ", at)) != std::string::npos) {
    auto end = out.find("\n\n", at);
    check(end != std::string::npos);
    data.push_back(out.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return data;
}

void fuzz_body(openai::endpoint ep, std::string_view body) {
  const openai::served_models models{"m", {"lora-a"}, 128};
  auto p = openai::parse_request(ep, body, models, "id-1");
  p.stream_tool_arguments = body.size() % 2 == 0;  // a server reading Qwen3's JSON calls, or not
  if (!p.ok()) {
    check(p.error.status == 400 || p.error.status == 404);
    check(!p.error.message.empty() && !p.error.code.empty());
    (void)nlohmann::json::parse(openai::error_body(p.error));  // throws (and fails) if not JSON
    return;
  }
  check(p.req->n >= 1);
  const int32_t seqs = p.req->sequences();  // n of each prompt of a batch
  check(seqs >= p.req->n && seqs <= 128);
  openai::response_builder b(ep, p, 1, [](int32_t id) { return std::string(1, static_cast<char>(id)); });
  if (p.echo)
    for (size_t k = 0; k < std::max<size_t>(1, p.req->prompts.size()); ++k)
      b.set_echo_prompt(k, std::string(body.substr(0, 8)), {1, 2, 3});
  std::string out;
  for (int32_t i = 0; i < seqs; ++i) {
    token_event t;
    t.id = p.req->id;
    t.text = std::string(body.substr(0, 16));  // may be any bytes: the writer must keep JSON valid
    t.ids = {i};
    t.logprobs = logprob_info{-1.0, {{i, -1.0}}, std::nullopt, std::nullopt};
    if (seqs > 1) t.index = i;
    out += b.feed(t);
    done_event d;
    d.id = p.req->id;
    d.reason = i % 2 ? finish_reason::length : finish_reason::stop;
    d.has_output = !p.req->stream;
    d.text = t.text + "<tool_call>";
    d.ids = {i};
    d.logprobs = {*t.logprobs};
    if (p.req->prompt_logprobs) d.prompt_logprobs = std::vector<logprob_info>{*t.logprobs};
    if (seqs > 1) d.index = i;
    // Pooled requests' results (embeddings, rerank / score, classify), the label any bytes.
    d.embedding = std::vector<float>{0.5f, -0.25f};
    d.score = 0.75;
    d.probs = std::vector<float>{0.25f, 0.75f};
    d.label = std::string(body.substr(0, 8));
    out += b.feed(d);
  }
  check(b.complete());
  if (!b.streaming()) {
    (void)nlohmann::json::parse(out);
    return;
  }
  for (const auto& data : sse_data(out))
    if (data != "[DONE]") (void)nlohmann::json::parse(data);
  check(out.size() >= 14 && out.compare(out.size() - 14, 14, "data: [DONE]\n\n") == 0);
}

// A model's output made from the input's bytes (`any`), fed as token events: thinking, </think>
// (id 4), then the answer and a tool call's start.
// What the model writes: thinking, text, then the start of a call, each token's text `any`.
std::vector<token_event> model_tokens(const std::string& id, const std::string& any) {
  std::vector<token_event> out;
  for (int32_t i = 0; i < 6; ++i) {
    token_event t;
    t.id = id;
    t.ids = {i};
    t.logprobs = logprob_info{-1.0, {{i, -1.0}}, std::nullopt, std::nullopt};
    if (i < 3) t.reasoning = any;
    else t.text = i == 5 ? "<tool_call>{\"name\": \"f\", \"arguments\": {" + any : any;
    out.push_back(std::move(t));
  }
  return out;
}

std::string feed_model_output(openai::reply_builder& b, const std::string& id, const std::string& any) {
  std::string out;
  for (const auto& t : model_tokens(id, any)) out += b.feed(t);
  return out;
}

// Its done event: length or stop as the input's size says; `whole` when the request did not stream.
done_event model_done(const std::string& id, std::string_view body, bool whole) {
  done_event d;
  d.id = id;
  d.reason = body.size() % 3 == 0 ? finish_reason::length : finish_reason::stop;
  d.has_output = whole;
  return d;
}

// A background response (runtime/wire/background_response.hpp): kept queued, then final (a failure
// too), every state valid JSON, its events one by one with their sequence numbers.
void fuzz_background(const openai::parsed_responses& p, const std::shared_ptr<openai::response_store>& store,
                     std::string_view body) {
  openai::background_response bg(p, 1, [](int32_t id) { return std::string(1, static_cast<char>(id)); }, 4, store);
  check(!store->get("resp_1")->finished);
  const std::string any(body.substr(0, 16));
  for (const auto& t : model_tokens(p.chat.req->id, any)) {
    bg.feed(t);
    check(nlohmann::json::parse(bg.current_json())["status"] == "in_progress");
  }
  done_event d = model_done(p.chat.req->id, body, !p.chat.req->stream);
  d.text = any;
  if (body.size() % 5 == 0) {
    d.reason = finish_reason::error;
    d.error = wire_error{error_code::internal, any, p.chat.req->id};
  }
  bg.feed(d);
  check(bg.complete());
  const auto kept = store->get("resp_1");
  check(kept && kept->finished && *kept->response == bg.current_json());
  (void)nlohmann::json::parse(*kept->response);
  check(bg.events().empty() != p.chat.req->stream);
  for (size_t i = 0; i < bg.events().size(); ++i) {
    const auto data = sse_data(bg.events()[i]);
    check(data.size() == 1 && nlohmann::json::parse(data[0])["sequence_number"] == i);
  }
}

void fuzz_responses(std::string_view body) {
  const openai::served_models models{"m", {"lora-a"}, 128};
  // A store holding one response, so that previous_response_id "resp_0" continues it.
  auto store_ptr = std::make_shared<openai::response_store>(1 << 20);
  auto& store = *store_ptr;
  store.put("resp_0", nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}), "{}");
  openai::conversation_store conversations(1 << 20);
  openai::conversation c0;
  c0.id = "conv_0";
  c0.append(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));
  conversations.put(c0);
  auto p = openai::parse_responses(body, models, "resp_1", &store, &conversations);
  if (!p.ok()) {
    check(p.chat.error.status == 400 || p.chat.error.status == 404);
    check(!p.chat.error.message.empty() && !p.chat.error.code.empty());
    (void)nlohmann::json::parse(openai::error_body(p.chat.error));
    return;
  }
  check(p.chat.req->n == 1);
  p.chat.stream_tool_arguments = body.size() % 4 < 2;
  if (p.background) return fuzz_background(p, store_ptr, body);
  openai::responses_builder b(p, 1, [](int32_t id) { return std::string(1, static_cast<char>(id)); }, 4);
  bool kept = false;
  if (p.store || p.conversation_id)
    b.set_on_final([&](const nlohmann::ordered_json& r) {
      if (p.store) {
        openai::keep_response(store, "resp_1", *p.conversation, r);
        kept = true;
      }
      if (p.conversation_id) openai::add_to_conversation(conversations, *p.conversation_id, *p.new_items, r);
    });
  const std::string any(body.substr(0, 16));  // may be any bytes: the writer must keep JSON valid
  std::string out = feed_model_output(b, p.chat.req->id, any);
  done_event d = model_done(p.chat.req->id, body, !p.chat.req->stream);
  d.text = any + "<tool_call>";
  d.reasoning = any;
  d.ids = {1, 4, 5};
  d.logprobs = {{-1.0, {}}, {-1.0, {}}, {-1.0, {}}};
  if (body.size() % 2) d.tool_calls = {{any, "{}"}};
  out += b.feed(d);
  check(b.complete());
  if (kept) {
    // Whatever the model wrote, a stored response continues: its items are valid input again.
    auto next = openai::parse_responses(R"({"previous_response_id": "resp_1", "input": "more"})", models, "resp_2", &store);
    check(next.ok() || next.chat.error.param.rfind("messages", 0) == 0);
  }
  if (p.conversation_id) {
    // Whatever the model wrote, the conversation goes on: its items are valid input again.
    auto next = openai::parse_responses(R"({"conversation": "conv_0", "input": "more"})", models, "resp_3", nullptr,
                                        &conversations);
    check(next.ok() || next.chat.error.param.rfind("messages", 0) == 0);
  }
  if (!b.streaming()) {
    (void)nlohmann::json::parse(out);
    return;
  }
  std::string last;
  for (const auto& data : sse_data(out)) last = nlohmann::json::parse(data)["type"];
  check(last == "response.completed" || last == "response.failed");
}

void fuzz_conversations(std::string_view in) {
  openai::conversation_store store(4096);
  openai::conversation c0;
  c0.id = "conv_0";
  c0.append(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));
  store.put(c0);
  const size_t nl = in.find('\n');
  const std::string_view head = in.substr(0, nl), body = nl == std::string_view::npos ? "" : in.substr(nl + 1);
  static constexpr std::string_view methods[] = {"GET", "POST", "DELETE", "PUT"};
  openai::conversations_call call;
  call.method = methods[head.empty() ? 0 : static_cast<uint8_t>(head[0]) % 4];
  call.rest = head.empty() ? head : head.substr(1);
  call.body = body;
  if (body.size() > 3) call.order = std::string(body.substr(0, 3));
  if (body.size() % 3 == 0) call.limit = std::string(body.substr(0, body.size() % 5));
  call.now = 1;
  call.new_id = "conv_1";
  for (int round = 0; round < 2; ++round) {  // twice: the first call may have made or changed one
    const auto a = openai::serve_conversations(store, call);
    check(a.status == 200 || a.status == 400 || a.status == 404 || a.status == 405);
    (void)nlohmann::json::parse(a.body);
    check(store.bytes() <= store.max_bytes());
  }
}

void fuzz_anthropic(std::string_view body) {
  const openai::served_models models{"m", {"lora-a"}, 128};
  auto p = anthropic::parse_messages(body, models, "msg_1", body.size() % 5 == 0);
  if (!p.ok()) {
    check(p.error.status == 400 || p.error.status == 404);
    check(!p.error.message.empty() && !p.error.code.empty());
    (void)nlohmann::json::parse(anthropic::error_body(p.error));
    return;
  }
  if (p.count) return;
  p.chat.stream_tool_arguments = body.size() % 4 < 2;
  anthropic::messages_builder b(p);
  const std::string any(body.substr(0, 16));
  std::string out = feed_model_output(b, p.chat.req->id, any);
  done_event d = model_done(p.chat.req->id, body, !p.chat.req->stream);
  d.text = any + (p.stop_sequences.empty() ? std::string() : p.stop_sequences[0]);
  d.reasoning = any;
  if (body.size() % 2) d.tool_calls = {{any, "{}"}};
  out += b.feed(d);
  check(b.complete());
  if (!b.streaming()) {
    (void)nlohmann::json::parse(out);
    return;
  }
  std::string last;
  for (const auto& data : sse_data(out)) last = nlohmann::json::parse(data)["type"];
  check(last == "message_stop" || last == "error");
}

void check_error(const openai::api_error& e);

void fuzz_lora(std::string_view body) {
  for (bool load : {true, false}) {
    auto r = openai::parse_lora_request(body, load, openai::served_models{"m", {}, 128, {"alias"}});
    if (!r.ok()) {
      check_error(r.error);
      continue;
    }
    check(r.name != "m" && (!load || !r.path.empty()));
  }
}

void check_error(const openai::api_error& e) {
  check(e.status == 400 || e.status == 404);
  check(!e.message.empty() && !e.code.empty());
  (void)nlohmann::json::parse(openai::error_body(e));
}

void fuzz_tokenize(std::string_view body) {
  const openai::served_models models{"m", {"lora-a"}, 128};
  auto t = openai::parse_tokenize(body, models, "tokenize-1");
  if (!t.ok()) {
    check_error(t.error);
  } else {
    check(t.req->id == "tokenize-1");
    const std::vector<std::string> strs{std::string(body.substr(0, 4))};  // any bytes
    (void)nlohmann::json::parse(openai::tokenize_body({1}, 128, t.token_strs ? &strs : nullptr));
  }
  auto d = openai::parse_detokenize(body, models);
  if (!d.ok()) return check_error(d.error);
  for (int32_t id : *d.ids) check(id >= 0);
  (void)nlohmann::json::parse(openai::detokenize_body(std::string(body.substr(0, 8))));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {
    case 0: fuzz_http(in); break;
    case 1: fuzz_body(openai::endpoint::chat, in); break;
    case 2: {  // the pooled endpoints
      constexpr openai::endpoint pooled[] = {openai::endpoint::embeddings, openai::endpoint::rerank,
                                             openai::endpoint::score, openai::endpoint::classify};
      fuzz_body(pooled[in.size() % 4], in);
      break;
    }
    case 3: fuzz_tokenize(in); break;
    case 4: fuzz_responses(in); break;
    case 5: fuzz_lora(in); break;
    case 6: fuzz_anthropic(in); break;
    case 7: fuzz_conversations(in); break;
    default: fuzz_body(openai::endpoint::completion, in); break;
  }
  return 0;
}
