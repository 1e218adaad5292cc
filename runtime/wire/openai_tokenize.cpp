#include "runtime/wire/openai_tokenize.hpp"

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::openai {

using namespace detail;

tokenize_call parse_tokenize(std::string_view body, const served_models& models, const std::string& id) {
  tokenize_call out;
  try {
    const ojson b = parse_body(body);
    ojson w = {{"v", protocol_version}, {"type", "tokenize"}, {"id", id}};
    const bool chat = b.contains("messages") && !b["messages"].is_null();
    for (const auto& [k, v] : b.items()) {
      if (v.is_null()) continue;  // OpenAI's clients send null for "not set"
      if (k == "model") {
        names_adapter(v, models);  // an adapter tokenizes as its base model does
      } else if (k == "prompt") {
        if (chat) refuse("invalid_value", k, "give 'prompt' or 'messages', not both");
        want(v, v.is_string(), k, "a string");
        w["prompt"] = v;
      } else if (k == "messages") {
        w["messages"] = messages(v);
      } else if (k == "return_token_strs") {
        want(v, v.is_boolean(), k, "a boolean");
        out.token_strs = v.get<bool>();
      } else if (k == "add_special_tokens") {
        want(v, v.is_boolean(), k, "a boolean");  // Qwen3's tokenizer adds no BOS or EOS either way
      } else if (chat && (k == "add_generation_prompt" || k == "continue_final_message")) {
        w[k] = v;
      } else if (chat && k == "chat_template_kwargs") {
        chat_template_kwargs(v, w);
      } else if (chat && k == "chat_template") {
        w[k] = v;
      } else if (chat && k == "tools") {
        w["tools"] = v;
      } else {
        refuse("unknown_field", k,
               "unknown field '" + k + "' for /tokenize with " + (chat ? "messages" : "a prompt") +
                   " (docs/openai_api.md lists the fields served)");
      }
    }
    if (!w.contains("prompt") && !w.contains("messages"))
      refuse("missing_field", "prompt", "/tokenize needs field 'prompt' (a string) or 'messages'");
    auto d = decode_wire(w, out.error);
    if (!d) return out;
    out.req = std::get<tokenize_request>(std::move(*d));
  } catch (const refusal& r) {
    out.error = r.e;
  } catch (const std::exception& e) {
    out.error = {400, std::string("the request body cannot be read: ") + e.what(), "malformed", ""};
  }
  return out;
}

std::string tokenize_body(const std::vector<int32_t>& ids, int64_t max_model_len,
                          const std::vector<std::string>* token_strs) {
  return dump(ojson{{"count", ids.size()},
                    {"max_model_len", max_model_len},
                    {"tokens", ids},
                    {"token_strs", token_strs ? ojson(*token_strs) : ojson(nullptr)}});
}

detokenize_call parse_detokenize(std::string_view body, const served_models& models) {
  detokenize_call out;
  try {
    const ojson b = parse_body(body);
    for (const auto& [k, v] : b.items()) {
      if (v.is_null()) continue;
      if (k == "model") {
        names_adapter(v, models);
      } else if (k == "tokens") {
        want(v, v.is_array(), k, "an array of token ids");
        std::vector<int32_t> ids;
        ids.reserve(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          const auto& t = v[i];
          const std::string f = "tokens[" + std::to_string(i) + "]";
          want(t, t.is_number_integer(), f, "an integer token id");
          if (t.is_number_unsigned() ? t.get<uint64_t>() > INT32_MAX : t.get<int64_t>() < 0)
            refuse("invalid_value", f, "token id " + t.dump() + " at " + f + " is not a token id (0 .. 2147483647)");
          ids.push_back(t.get<int32_t>());
        }
        out.ids = std::move(ids);
      } else {
        refuse("unknown_field", k, "unknown field '" + k + "' for /detokenize (it takes 'tokens' and 'model')");
      }
    }
    if (!out.ids) refuse("missing_field", "tokens", "/detokenize needs field 'tokens' (an array of token ids)");
  } catch (const refusal& r) {
    out.ids.reset();
    out.error = r.e;
  }
  return out;
}

std::string detokenize_body(const std::string& text) { return dump(ojson{{"prompt", text}}); }

}  // namespace troupe::wire::openai
