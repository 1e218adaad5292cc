#include "runtime/serve/chat_renderer.hpp"

#include "runtime/core/json_in_order.hpp"

namespace troupe::serve {

chat_renderer make_chat_renderer(std::shared_ptr<const chat_template> tmpl) {
  return [tmpl](const std::vector<wire::chat_message>& msgs, const std::string& tools, const chat_options& o) {
    // The wire decoder wrote tools and tool calls as JSON text with the client's key order, which
    // the template prints as it is (tojson): ordered_json keeps it. parse_json_in_order, not
    // ordered_json::parse, whose key search is quadratic (80,000 keys: 20 s in this worker).
    using ojson = nlohmann::ordered_json;
    ojson m = ojson::array();
    for (const auto& x : msgs) {
      ojson j{{"role", x.role}, {"content", x.content}};
      if (!x.reasoning_content.empty()) j["reasoning_content"] = x.reasoning_content;
      if (!x.tool_calls_json.empty()) j["tool_calls"] = parse_json_in_order(x.tool_calls_json);
      m.push_back(std::move(j));
    }
    const ojson t = tools.empty() ? ojson(nullptr) : parse_json_in_order(tools);
    const ojson extra = {{"enable_thinking", o.enable_thinking}};
    if (o.continue_final_message) return tmpl->render_continuing(m, t, extra);
    return tmpl->render(m, t, o.add_generation_prompt, extra);
  };
}

}  // namespace troupe::serve
