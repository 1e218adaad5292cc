#include "runtime/serve/chat_renderer.hpp"

#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/core/json_in_order.hpp"
#include "runtime/wire/request_codec.hpp"

namespace troupe::serve {

namespace {

using ojson = nlohmann::ordered_json;

// As vLLM before it applies a template: each call's `arguments`, JSON text in OpenAI's API, becomes
// the value it holds (empty: {}), since templates iterate it (Qwen3-Coder's: `arguments|items`) or
// print it with tojson (Qwen3's, which then spaces it as transformers does).
void arguments_as_values(ojson& calls, size_t message) {
  if (!calls.is_array()) return;
  for (size_t k = 0; k < calls.size(); ++k) {
    ojson& call = calls[k];
    if (!call.is_object()) continue;
    ojson& f = call.contains("function") && call["function"].is_object() ? call["function"] : call;
    auto a = f.find("arguments");
    if (a == f.end() || !a->is_string()) continue;
    const std::string text = a->get<std::string>();
    try {
      *a = text.empty() ? ojson::object() : parse_json_in_order(text);
    } catch (const std::exception& e) {
      throw std::invalid_argument("messages[" + std::to_string(message) + "].tool_calls[" + std::to_string(k) +
                                  "] arguments are not JSON: " + e.what());
    }
  }
}

// Requests' own templates (--trust-request-chat-template), compiled once and kept: a client that
// sends one usually sends it with every request. The last kKept by first use; shared by the
// tokenizer workers.
class request_templates {
 public:
  explicit request_templates(nlohmann::ordered_json special_tokens) : special_(std::move(special_tokens)) {}

  // Throws std::invalid_argument "chat_template: ..." for a template outside the Jinja subset.
  std::shared_ptr<const chat_template> get(std::string_view text) {
    std::lock_guard lock(mu_);
    for (const auto& [t, compiled] : kept_)
      if (t == text) return compiled;
    std::shared_ptr<const chat_template> compiled;
    try {
      compiled = std::make_shared<const chat_template>(std::string(text), special_);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("chat_template: ") + e.what());
    }
    if (kept_.size() == kKept) kept_.pop_front();
    kept_.emplace_back(std::string(text), compiled);
    return compiled;
  }

 private:
  static constexpr size_t kKept = 8;
  nlohmann::ordered_json special_;
  std::mutex mu_;
  std::deque<std::pair<std::string, std::shared_ptr<const chat_template>>> kept_;
};

}  // namespace

template_defaults parse_template_defaults(const std::string& json) {
  template_defaults d;
  if (json.empty()) return d;
  const std::string field = "model.default_chat_template_kwargs (--default-chat-template-kwargs)";
  ojson j;
  try {
    j = parse_json_in_order(json);
  } catch (const std::exception& e) {
    throw_error(errc::invalid_argument, field + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw_error(errc::invalid_argument, field + ": expected a JSON object, got " + j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "enable_thinking") {
      if (!it.value().is_boolean())
        throw_error(errc::invalid_argument, field + ": enable_thinking must be true or false, not " + it.value().dump());
      d.enable_thinking = it.value().get<bool>();
    } else if (wire::is_reserved_template_variable(it.key())) {
      throw_error(errc::invalid_argument, field + ": '" + it.key() + "' is not a template switch (requests set it)");
    } else {
      d.kwargs[it.key()] = it.value();
    }
  }
  return d;
}

chat_renderer make_chat_renderer(std::shared_ptr<const chat_template> tmpl, ojson defaults) {
  auto own = std::make_shared<request_templates>(tmpl->special_tokens());
  return [tmpl, own, defaults = std::move(defaults)](const std::vector<wire::chat_message>& msgs,
                                                     const std::string& tools, const chat_options& o) {
    // The wire decoder wrote tools and tool calls as JSON text with the client's key order, which
    // the template prints as it is (tojson): ordered_json keeps it. parse_json_in_order, not
    // ordered_json::parse, whose key search is quadratic (80,000 keys: 20 s in this worker).
    ojson m = ojson::array();
    for (const auto& x : msgs) {
      ojson j{{"role", x.role}, {"content", x.content}};
      if (!x.reasoning_content.empty()) j["reasoning_content"] = x.reasoning_content;
      if (!x.tool_calls_json.empty()) {
        j["tool_calls"] = parse_json_in_order(x.tool_calls_json);
        arguments_as_values(j["tool_calls"], m.size());
      }
      m.push_back(std::move(j));
    }
    const ojson t = tools.empty() ? ojson(nullptr) : parse_json_in_order(tools);
    ojson extra = defaults;
    if (!o.kwargs_json.empty()) {  // the wire decoder checked it: an object without reserved names
      const ojson given = parse_json_in_order(o.kwargs_json);
      for (auto it = given.begin(); it != given.end(); ++it) extra[it.key()] = it.value();
    }
    extra["enable_thinking"] = o.enable_thinking;
    const auto used = o.template_text.empty() ? tmpl : own->get(o.template_text);
    if (o.continue_final_message) return used->render_continuing(m, t, extra);
    return used->render(m, t, o.add_generation_prompt, extra);
  };
}

}  // namespace troupe::serve
