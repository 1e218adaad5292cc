// vLLM's /tokenize and /detokenize bodies: what becomes the protocol's tokenize request (through
// its own decoder), what is refused with the field named, and the answers' shape.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/wire/openai_lora.hpp"
#include "runtime/wire/openai_tokenize.hpp"

namespace oa = troupe::wire::openai;
namespace wire = troupe::wire;
using json = nlohmann::json;

namespace {

const oa::served_models models{"qwen3", {"sql-lora"}, 4096};

oa::tokenize_call tokenize(const std::string& body) { return oa::parse_tokenize(body, models, "tokenize-1"); }

void refused(const oa::api_error& e, int status, const std::string& code, const std::string& param,
             const std::string& needle) {
  BOOST_TEST(e.status == status, e.message);
  BOOST_TEST(e.code == code, e.message);
  BOOST_TEST(e.param == param, e.message);
  BOOST_TEST(e.message.find(needle) != std::string::npos, e.message);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openai_tokenize)

BOOST_AUTO_TEST_CASE(a_prompt_or_messages_become_a_tokenize_request) {
  auto p = tokenize(R"({"model": "qwen3", "prompt": "Hello", "add_special_tokens": true, "return_token_strs": true})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(p.req->id == "tokenize-1");
  BOOST_TEST((p.req->kind == wire::prompt_kind::text));
  BOOST_TEST(p.req->prompt == "Hello");
  BOOST_TEST(p.token_strs);
  p = tokenize(R"({"model": "sql-lora", "messages": [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                  {"role": "user", "content": "Hi"}], "add_generation_prompt": true, "continue_final_message": false,
                  "chat_template_kwargs": {"enable_thinking": false},
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST((p.req->kind == wire::prompt_kind::messages));
  BOOST_REQUIRE_EQUAL(p.req->messages.size(), 2u);
  BOOST_TEST(p.req->messages[0].role == "system");  // OpenAI's newer name, as for chat completions
  BOOST_TEST(p.req->messages[0].content == "Be brief.");
  BOOST_TEST((p.req->enable_thinking == std::optional<bool>(false)));
  BOOST_TEST(p.req->tools_json.find("\"name\":\"f\"") != std::string::npos, p.req->tools_json);
  BOOST_TEST(!p.token_strs);
  BOOST_TEST(p.req->add_generation_prompt);
  BOOST_TEST(!p.req->continue_final_message);
  p = tokenize(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Sure"}],
                  "add_generation_prompt": false, "continue_final_message": true})");
  BOOST_TEST_REQUIRE(p.ok(), p.error.message);
  BOOST_TEST(!p.req->add_generation_prompt);
  BOOST_TEST(p.req->continue_final_message);
}

BOOST_AUTO_TEST_CASE(bad_tokenize_bodies_name_the_field) {
  refused(tokenize("[1]").error, 400, "malformed", "", "must be a JSON object");
  refused(tokenize("{").error, 400, "malformed", "", "not JSON");
  refused(tokenize("{}").error, 400, "missing_field", "prompt", "'prompt' (a string) or 'messages'");
  refused(tokenize(R"({"prompt": [1, 2]})").error, 400, "wrong_type", "prompt", "must be a string");
  refused(tokenize(R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})").error, 400, "invalid_value",
          "prompt", "not both");
  refused(tokenize(R"({"prompt": "a", "model": "other"})").error, 404, "model_not_found", "model", "'other' does not exist");
  refused(tokenize(R"({"prompt": "a", "promt": "b"})").error, 400, "unknown_field", "promt", "unknown field 'promt'");
  // Chat-only fields with a text prompt are unknown there, as in vLLM's two request forms.
  refused(tokenize(R"({"prompt": "a", "tools": []})").error, 400, "unknown_field", "tools", "with a prompt");
  // vLLM's rule: continuing the final message needs the generation prompt off.
  refused(tokenize(R"({"messages": [{"role": "user", "content": "a"}], "continue_final_message": true})").error, 400,
          "invalid_value", "continue_final_message", "'continue_final_message' needs 'add_generation_prompt' false");
  refused(tokenize(R"({"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": 1})").error, 400,
          "wrong_type", "add_generation_prompt", "add_generation_prompt");
  refused(tokenize(R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"tools": 1}})").error,
          400, "invalid_value", "chat_template_kwargs.tools", "not a template switch");
  auto kw = tokenize(R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"x": 1}})");
  BOOST_TEST_REQUIRE(kw.ok(), kw.error.message);
  BOOST_TEST(kw.req->template_kwargs_json == R"({"x":1})");
  refused(tokenize(R"({"prompt": "a", "return_token_strs": 1})").error, 400, "wrong_type", "return_token_strs", "a boolean");
  // The protocol decoder's own checks still hold, the field they name as `param`.
  refused(tokenize(R"({"prompt": ""})").error, 400, "invalid_value", "prompt", "'prompt' must not be empty");
  refused(tokenize(R"({"messages": [{"role": "wizard", "content": "a"}]})").error, 400, "invalid_value",
          "messages[0].role", "wizard");
}

BOOST_AUTO_TEST_CASE(detokenize_takes_token_ids) {
  auto d = oa::parse_detokenize(R"({"model": "qwen3", "tokens": [0, 151643, 2147483647]})", models);
  BOOST_TEST_REQUIRE(d.ok(), d.error.message);
  BOOST_TEST(*d.ids == (std::vector<int32_t>{0, 151643, 2147483647}), boost::test_tools::per_element());
  d = oa::parse_detokenize(R"({"tokens": []})", models);
  BOOST_TEST_REQUIRE(d.ok());
  BOOST_TEST(d.ids->empty());
  refused(oa::parse_detokenize(R"({})", models).error, 400, "missing_field", "tokens", "needs field 'tokens'");
  refused(oa::parse_detokenize(R"({"tokens": "abc"})", models).error, 400, "wrong_type", "tokens", "an array");
  refused(oa::parse_detokenize(R"({"tokens": [1, 2.5]})", models).error, 400, "wrong_type", "tokens[1]", "integer");
  refused(oa::parse_detokenize(R"({"tokens": [-1]})", models).error, 400, "invalid_value", "tokens[0]", "not a token id");
  refused(oa::parse_detokenize(R"({"tokens": [2147483648]})", models).error, 400, "invalid_value", "tokens[0]",
          "not a token id");
  refused(oa::parse_detokenize(R"({"tokens": [1], "skip": true})", models).error, 400, "unknown_field", "skip", "'skip'");
  refused(oa::parse_detokenize(R"({"tokens": [1], "model": "x"})", models).error, 404, "model_not_found", "model", "'x'");
}

BOOST_AUTO_TEST_CASE(answers_have_vllms_shape) {
  auto j = json::parse(oa::tokenize_body({9707, 1052}, 4096, nullptr));
  BOOST_TEST(j["count"] == 2);
  BOOST_TEST(j["max_model_len"] == 4096);
  BOOST_TEST(j["tokens"] == json({9707, 1052}));
  BOOST_TEST(j["token_strs"].is_null());
  const std::vector<std::string> strs{"Hello", "\xc4\xa0there"};
  j = json::parse(oa::tokenize_body({9707, 1052}, 4096, &strs));
  BOOST_TEST(j["token_strs"] == json(strs));
  BOOST_TEST(json::parse(oa::detokenize_body("a \"b\"\n"))["prompt"] == "a \"b\"\n");
  // A partial UTF-8 character (ids cut inside one) comes back as U+FFFD, never an exception.
  BOOST_TEST(json::parse(oa::detokenize_body("\xe4\xbd"))["prompt"] == "\xef\xbf\xbd");
}

// vLLM's runtime LoRA bodies: load needs lora_name and lora_path, unload lora_name (lora_int_id
// accepted); other fields, an empty or ill-typed name, the served model's name are refused naming
// the field; vLLM's success texts.
BOOST_AUTO_TEST_CASE(lora_load_and_unload_bodies) {
  auto aliased = models;
  aliased.aliases = {"claude-haiku"};
  auto l = oa::parse_lora_request(R"({"lora_name": "sql", "lora_path": "/a/b"})", true, models);
  BOOST_TEST_REQUIRE(l.ok());
  BOOST_TEST(l.name == "sql");
  BOOST_TEST(l.path == "/a/b");
  auto u = oa::parse_lora_request(R"({"lora_name": "sql", "lora_int_id": 3})", false, models);
  BOOST_TEST_REQUIRE(u.ok());
  BOOST_TEST(u.name == "sql");
  struct bad {
    std::string body;
    bool load;
    std::string code, param;
  };
  for (const auto& b : std::vector<bad>{{R"({"lora_path": "/a"})", true, "missing_field", "lora_name"},
                                        {R"({"lora_name": "x"})", true, "missing_field", "lora_path"},
                                        {R"({"lora_name": ""})", false, "wrong_type", "lora_name"},
                                        {R"({"lora_name": 3})", false, "wrong_type", "lora_name"},
                                        {R"({"lora_name": "x", "lora_path": "/a"})", false, "unknown_field", "lora_path"},
                                        {R"({"lora_name": "x", "lora_path": "/a", "colour": 1})", true, "unknown_field", "colour"},
                                        {R"({"lora_name": "x", "lora_path": "/a", "load_inplace": true})", true, "unsupported", "load_inplace"},
                                        {R"({"lora_name": "qwen3", "lora_path": "/a"})", true, "invalid_value", "lora_name"},
                                        {R"({"lora_name": "claude-haiku", "lora_path": "/a"})", true, "invalid_value", "lora_name"},
                                        {R"({"lora_name": )", true, "malformed", ""}}) {
    auto p = oa::parse_lora_request(b.body, b.load, aliased);
    BOOST_TEST(!p.ok(), b.body);
    BOOST_TEST(p.error.code == b.code, b.body << ": " << p.error.code);
    BOOST_TEST(p.error.param == b.param, b.body << ": " << p.error.param);
    BOOST_TEST(p.error.status == 400);
  }
  BOOST_TEST(oa::lora_loaded_text("sql") == "Success: LoRA adapter 'sql' added successfully.");
  BOOST_TEST(oa::lora_unloaded_text("sql") == "Success: LoRA adapter 'sql' removed successfully.");
}

BOOST_AUTO_TEST_SUITE_END()
