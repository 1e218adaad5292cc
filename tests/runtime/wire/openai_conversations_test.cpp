// OpenAI's Conversations API: the store (ids for items sent without, the byte bound, least
// recently used first out), every endpoint's answer in OpenAI's shape, the refusals naming what was
// wrong, and a response given `conversation`: its items ahead of the input, then its input and
// output added to it.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/wire/openai_conversations.hpp"
#include "runtime/wire/openai_responses.hpp"

namespace oa = troupe::wire::openai;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const oa::served_models models{"qwen3", {}, 4096, {}};
const std::string kId = "conv_00000000000000000000000000000abc";

// A copy of what the store holds under id (conversation_store::read), as a test wants to look at it.
std::optional<oa::conversation> stored(oa::conversation_store& store, const std::string& id) {
  std::optional<oa::conversation> out;
  store.read(id, [&](const oa::conversation& c) { out = c; });
  return out;
}

struct answer {
  int status;
  json body;
};

answer call(oa::conversation_store& store, std::string_view method, std::string_view rest, std::string_view body = "",
            std::optional<std::string> order = {}, std::optional<std::string> limit = {},
            std::optional<std::string> after = {}) {
  oa::conversations_call c;
  c.method = method;
  c.rest = rest;
  c.body = body;
  c.order = std::move(order);
  c.limit = std::move(limit);
  c.after = std::move(after);
  c.now = 1700000000;
  c.new_id = kId;
  auto a = oa::serve_conversations(store, c);
  return {a.status, json::parse(a.body)};
}

std::string path(const std::string& tail = "") { return "/" + kId + tail; }

}  // namespace

BOOST_AUTO_TEST_SUITE(conversations)

BOOST_AUTO_TEST_CASE(the_store_bounds_bytes_and_names_items) {
  oa::conversation_store store(400);
  oa::conversation a;
  a.id = "conv_a";
  auto added = a.append(ojson::array({{{"role", "user"}, {"content", "hi"}}, {{"id", "mine"}, {"role", "user"}, {"content", "x"}}}));
  BOOST_TEST(added[0]["id"] == "item_a_0");  // made here
  BOOST_TEST(added[1]["id"] == "mine");      // kept as sent
  BOOST_TEST(a.next_item == 1u);
  BOOST_TEST((store.put(a) == oa::conversation_store::status::ok));
  oa::conversation b;
  b.id = "conv_b";
  b.append(ojson::array({{{"role", "user"}, {"content", std::string(200, 'b')}}}));
  BOOST_TEST((store.put(b) == oa::conversation_store::status::ok));
  BOOST_TEST(store.size() == 2u);
  BOOST_TEST(stored(store, "conv_a").has_value());  // a is now the most recently used
  oa::conversation c;
  c.id = "conv_c";
  c.append(ojson::array({{{"role", "user"}, {"content", std::string(150, 'c')}}}));
  BOOST_TEST((store.put(c) == oa::conversation_store::status::ok));
  BOOST_TEST(!stored(store, "conv_b").has_value());  // the least recently used went
  BOOST_TEST(stored(store, "conv_a").has_value());
  BOOST_TEST(store.bytes() <= 400u);
  // A change that would not fit is not made.
  const auto s = store.update("conv_a", [](oa::conversation& x) {
    x.append(ojson::array({{{"role", "user"}, {"content", std::string(500, 'z')}}}));
  });
  BOOST_TEST((s == oa::conversation_store::status::too_big));
  BOOST_TEST(stored(store, "conv_a")->items.size() == 2u);
  BOOST_TEST((store.update("conv_zz", [](oa::conversation&) {}) == oa::conversation_store::status::unknown));
  oa::conversation huge;
  huge.id = "conv_h";
  huge.append(ojson::array({{{"role", "user"}, {"content", std::string(1000, 'h')}}}));
  BOOST_TEST((store.put(huge) == oa::conversation_store::status::too_big));
}

BOOST_AUTO_TEST_CASE(every_endpoint_answers_in_openais_shape) {
  oa::conversation_store store(1 << 20);
  auto a = call(store, "POST", "", R"({"metadata": {"topic": "weather"},
      "items": [{"type": "message", "role": "user", "content": "Hello"}]})");
  BOOST_TEST_REQUIRE(a.status == 200, a.body.dump());
  BOOST_TEST(a.body == json::parse(R"({"id": ")" + kId + R"(", "object": "conversation", "created_at": 1700000000,
                                        "metadata": {"topic": "weather"}})"));
  a = call(store, "GET", path());
  BOOST_TEST(a.body["metadata"]["topic"] == "weather");
  a = call(store, "POST", path(), R"({"metadata": {"topic": "tides"}})");
  BOOST_TEST_REQUIRE(a.status == 200, a.body.dump());
  BOOST_TEST(a.body["metadata"]["topic"] == "tides");

  a = call(store, "POST", path("/items"), R"({"items": [{"role": "assistant", "content": "Hi"},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "42"}]})");
  BOOST_TEST_REQUIRE(a.status == 200, a.body.dump());
  BOOST_TEST(a.body["object"] == "list");
  BOOST_TEST_REQUIRE(a.body["data"].size() == 3u);
  BOOST_TEST(a.body["data"][0]["content"][0]["type"] == "output_text");  // listed as OpenAI lists it
  BOOST_TEST(a.body["first_id"] == a.body["data"][0]["id"]);
  const std::string call_item = a.body["data"][1]["id"];

  // Newest first by default; asc, limit and after page through.
  a = call(store, "GET", path("/items"));
  BOOST_TEST_REQUIRE(a.body["data"].size() == 4u);
  BOOST_TEST(a.body["data"][0]["type"] == "function_call_output");
  BOOST_TEST(a.body["data"][3]["content"][0]["text"] == "Hello");
  BOOST_TEST(a.body["data"][3]["content"][0]["type"] == "input_text");
  a = call(store, "GET", path("/items"), "", "asc", "2");
  BOOST_TEST_REQUIRE(a.body["data"].size() == 2u);
  BOOST_TEST(a.body["has_more"] == true);
  a = call(store, "GET", path("/items"), "", "asc", "2", a.body["last_id"].get<std::string>());
  BOOST_TEST_REQUIRE(a.body["data"].size() == 2u);
  BOOST_TEST(a.body["data"][1]["type"] == "function_call_output");
  BOOST_TEST(a.body["has_more"] == false);

  a = call(store, "GET", path("/items/" + call_item));
  BOOST_TEST_REQUIRE(a.status == 200, a.body.dump());
  BOOST_TEST(a.body["name"] == "f");
  a = call(store, "DELETE", path("/items/" + call_item));
  BOOST_TEST_REQUIRE(a.status == 200, a.body.dump());
  BOOST_TEST(a.body["object"] == "conversation");
  BOOST_TEST(stored(store, kId)->items.size() == 3u);
  BOOST_TEST(call(store, "GET", path("/items/" + call_item)).status == 404);

  a = call(store, "DELETE", path());
  BOOST_TEST(a.body == json::parse(R"({"id": ")" + kId + R"(", "object": "conversation.deleted", "deleted": true})"));
  BOOST_TEST(call(store, "GET", path()).status == 404);
  BOOST_TEST(store.size() == 0u);
}

BOOST_AUTO_TEST_CASE(bad_calls_name_what_was_wrong) {
  oa::conversation_store store(1 << 20);
  BOOST_TEST_REQUIRE(call(store, "POST", "", "").status == 200);  // an empty body: an empty conversation
  struct bad {
    std::string method, rest, body;
    int status;
    std::string code, param;
  };
  const std::string twenty_one = [] {
    std::string s = R"({"items": [)";
    for (int i = 0; i < 21; ++i) s += std::string(i ? "," : "") + R"({"role": "user", "content": "x"})";
    return s + "]}";
  }();
  const std::vector<bad> cases = {
      {"GET", "", "", 405, "method_not_allowed", ""},
      {"POST", "", R"({"items": [{"role": "robot", "content": "x"}]})", 400, "invalid_value", "items[0].role"},
      {"POST", "", R"({"items": [{"type": "image", "url": "x"}]})", 400, "unsupported", "items[0].type"},
      {"POST", "", R"({"items": "hi"})", 400, "wrong_type", "items"},
      {"POST", "", twenty_one, 400, "invalid_value", "items"},
      {"POST", "", R"({"metadata": {"k": 3}})", 400, "wrong_type", "metadata.k"},
      {"POST", "", R"({"title": "t"})", 400, "unknown_field", "title"},
      {"POST", "", "{", 400, "malformed", ""},
      {"GET", "/conv_nope", "", 404, "not_found", "conversation_id"},
      {"POST", path(), R"({"metadata": {"a": "b"}, "items": []})", 400, "unknown_field", "items"},
      {"POST", path(), R"({})", 400, "missing_field", "metadata"},
      {"PUT", path(), "", 405, "method_not_allowed", ""},
      {"POST", path("/items"), R"({"items": []})", 400, "invalid_value", "items"},
      {"POST", "/conv_nope/items", R"({"items": [{"role": "user", "content": "x"}]})", 404, "not_found", "conversation_id"},
      {"DELETE", path("/items"), "", 405, "method_not_allowed", ""},
      {"GET", path("/items/item_9"), "", 404, "not_found", "item_id"},
      {"GET", path("/items"), "", 200, "", ""},
      {"GET", path("/other"), "", 404, "not_found", ""},
  };
  for (const auto& c : cases) {
    auto a = call(store, c.method, c.rest, c.body);
    BOOST_TEST(a.status == c.status, c.method << " " << c.rest << " " << c.body << ": " << a.body.dump());
    if (c.status == 200) continue;
    BOOST_TEST(a.body["error"]["code"] == c.code, c.body << ": " << a.body.dump());
    BOOST_TEST(a.body["error"]["param"] == (c.param.empty() ? json(nullptr) : json(c.param)), c.body << ": " << a.body.dump());
  }
  auto a = call(store, "GET", path("/items"), "", "sideways");
  BOOST_TEST(a.body["error"]["param"] == "order");
}

// A response given the conversation: its items go ahead of the input (not with
// previous_response_id); the response names it; at the end its input and output join it.
BOOST_AUTO_TEST_CASE(a_response_reads_and_extends_its_conversation) {
  oa::conversation_store store(1 << 20);
  BOOST_TEST_REQUIRE(call(store, "POST", "", R"({"items": [{"role": "user", "content": "Hello"},
      {"role": "assistant", "content": "Hi there"}]})").status == 200);
  auto p = oa::parse_responses(R"({"input": "Weather?", "conversation": ")" + kId + R"(", "instructions": "Be brief."})",
                               models, "resp_0a", nullptr, &store);
  BOOST_TEST_REQUIRE(p.ok(), p.chat.error.message);
  const auto& m = p.chat.req->messages;
  BOOST_TEST_REQUIRE(m.size() == 4u);
  BOOST_TEST(m[0].role == "system");
  BOOST_TEST(m[1].content == "Hello");
  BOOST_TEST(m[2].role == "assistant");
  BOOST_TEST(m[3].content == "Weather?");
  BOOST_TEST(json::parse(p.echo_json)["conversation"]["id"] == kId);
  const auto obj = oa::parse_responses(R"({"input": "x", "conversation": {"id": ")" + kId + R"("}})", models, "r", nullptr, &store);
  BOOST_TEST(obj.ok(), obj.chat.error.message);
  const auto both = oa::parse_responses(R"({"input": "x", "conversation": ")" + kId + R"(", "previous_response_id": "resp_1"})",
                                        models, "r", nullptr, &store);
  BOOST_TEST(both.chat.error.param == "conversation");

  const ojson response = {{"id", "resp_0a"}, {"status", "completed"},
                          {"output", ojson::array({{{"id", "msg_0a_0"}, {"type", "message"}, {"role", "assistant"},
                                                    {"status", "completed"},
                                                    {"content", ojson::array({{{"type", "output_text"}, {"text", "Sunny"}, {"annotations", ojson::array()}}})}}})}};
  BOOST_TEST(oa::add_to_conversation(store, kId, *p.new_items, response));
  auto c = stored(store, kId);
  BOOST_TEST_REQUIRE(c->items.size() == 4u);
  BOOST_TEST(c->items[2]["content"] == "Weather?");
  BOOST_TEST(c->items[2]["id"].is_string());
  BOOST_TEST(c->items[3]["id"] == "msg_0a_0");
  ojson failed = response;
  failed["status"] = "failed";
  BOOST_TEST(!oa::add_to_conversation(store, kId, *p.new_items, failed));
  BOOST_TEST(!oa::add_to_conversation(store, "conv_gone", *p.new_items, response));
  BOOST_TEST(stored(store, kId)->items.size() == 4u);
  // The next response reads all of it.
  auto next = oa::parse_responses(R"({"input": "And tomorrow?", "conversation": ")" + kId + R"("})", models, "resp_0b", nullptr, &store);
  BOOST_TEST_REQUIRE(next.ok(), next.chat.error.message);
  BOOST_TEST(next.chat.req->messages.size() == 5u);
  BOOST_TEST(next.chat.req->messages[3].content == "Sunny");
}

BOOST_AUTO_TEST_SUITE_END()
