// Chat template loading and rendering (see chat_template.hpp). The variables are those of
// transformers' apply_chat_template: messages, tools (None when absent), documents (None),
// add_generation_prompt, the special-token strings, and any extra keyword arguments.
#include "runtime/tokenizer/chat_template.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/jinja/context.hpp"
#include "runtime/tokenizer/jinja/parser.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe {

namespace {

using ojson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(errc::io_error, "cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<std::string> token_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

chat_template chat_template::from_directory(const std::string& model_dir, const std::string& override_template) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  const std::string jinja_path = (fs::path(model_dir) / "chat_template.jinja").string();
  ojson cfg = ojson::object();
  if (fs::exists(cfg_path)) {
    try {
      cfg = ojson::parse(read_file(cfg_path));
    } catch (const ojson::exception& e) {
      throw_error(errc::invalid_checkpoint, cfg_path + ": " + e.what());
    }
  }
  std::string source;
  std::string origin = model_dir;  // what an error in the template names
  if (!override_template.empty()) {
    std::error_code ec;
    if (fs::is_regular_file(override_template, ec)) {
      source = read_file(override_template);
      origin = override_template;
    } else if (override_template.find("{{") != std::string::npos || override_template.find("{%") != std::string::npos) {
      source = override_template;
      origin = "the chat template given inline";
    } else {
      throw_error(errc::io_error, "chat template '" + override_template +
                                      "' is neither a file nor a template (no '{{' or '{%' in it)");
    }
  } else if (fs::exists(jinja_path)) {
    source = read_file(jinja_path);
  } else if (cfg.contains("chat_template") && cfg["chat_template"].is_string()) {
    source = cfg["chat_template"].get<std::string>();
  } else if (cfg.contains("chat_template") && cfg["chat_template"].is_array()) {
    for (const auto& t : cfg["chat_template"])
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        source = t["template"].get<std::string>();
    if (source.empty()) throw_error(errc::invalid_checkpoint, cfg_path + ": chat_template list has no \"default\" entry");
  } else {
    throw_error(errc::unsupported, model_dir + " has no chat template (neither chat_template.jinja nor "
                                                "\"chat_template\" in tokenizer_config.json)");
  }
  ojson special = ojson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!cfg.contains(key)) continue;
    if (auto t = token_text(cfg[key])) special[key] = *t;
  }
  if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array()) {
    ojson list = ojson::array();
    for (const auto& t : cfg["additional_special_tokens"])
      if (auto s = token_text(t)) list.push_back(*s);
    special["additional_special_tokens"] = list;
  }
  try {
    return chat_template(std::move(source), std::move(special));
  } catch (const troupe::error& e) {
    throw troupe::error(e.code(), origin + ": " + e.what());
  }
}

chat_template::chat_template(std::string source, ojson special_tokens)
    : source_(std::move(source)), special_tokens_(std::move(special_tokens)) {
  if (size_t bad = tok::find_invalid_utf8(source_); bad != tok::npos)
    throw_error(errc::invalid_checkpoint, "chat template is not valid UTF-8 at byte offset " + std::to_string(bad));
  program_ = std::make_shared<const jinja::body>(jinja::parse(source_));
}

std::string chat_template::render(const ojson& messages, const ojson& tools, bool add_generation_prompt,
                                  const ojson& extra) const {
  if (!messages.is_array()) throw_error(errc::invalid_input, "\"messages\" must be an array of message objects");
  for (size_t i = 0; i < messages.size(); ++i)
    if (!messages[i].is_object())
      throw_error(errc::invalid_input, "messages[" + std::to_string(i) + "] must be an object, got " + messages[i].dump());
  if (!tools.is_null() && !tools.is_array()) throw_error(errc::invalid_input, "\"tools\" must be an array or null");
  if (!extra.is_object()) throw_error(errc::invalid_input, "extra template variables must be an object");

  auto globals = jinja::builtin_globals();
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it) globals[it.key()] = jinja::from_json(it.value());
  globals["messages"] = jinja::from_json(messages);
  globals["tools"] = jinja::from_json(tools);
  globals["documents"] = jinja::value(jinja::none{});
  globals["add_generation_prompt"] = jinja::value(add_generation_prompt);
  for (auto it = extra.begin(); it != extra.end(); ++it) globals[it.key()] = jinja::from_json(it.value());
  jinja::context ctx(std::move(globals));
  std::string out;
  jinja::exec_body(*program_, ctx, out);
  return out;
}

std::string chat_template::render_continuing(const ojson& messages, const ojson& tools, const ojson& extra) const {
  // transformers' marker and checks (render_jinja_template), so the text is the one it renders.
  static constexpr std::string_view tag = "CONTINUE_FINAL_MESSAGE_TAG ";
  static constexpr std::string_view ws = " \t\n\r\f\v";
  if (!messages.is_array() || messages.empty())
    throw_error(errc::invalid_input, "continue_final_message is set but the conversation is empty");
  const auto& last = messages.back();
  if (!last.is_object() || !last.contains("content") || !last["content"].is_string())
    throw_error(errc::invalid_input, "continue_final_message is set but the final message has no text content to continue");
  if (source_.find("content") == std::string::npos)
    throw_error(errc::invalid_input, "continue_final_message is set but the chat template does not read \"content\"");
  const std::string final_text = last["content"].get<std::string>();
  ojson tagged = messages;
  tagged.back()["content"] = final_text + std::string(tag);
  std::string out = render(tagged, tools, /*add_generation_prompt=*/false, extra);
  const auto strip = [&](std::string_view t) {
    const auto b = t.find_first_not_of(ws);
    return b == std::string_view::npos ? std::string_view() : t.substr(b, t.find_last_not_of(ws) - b + 1);
  };
  const auto bare_tag = strip(tag);
  const auto at = out.rfind(bare_tag);
  if (at == std::string::npos || out.find(strip(final_text)) == std::string::npos)
    throw_error(errc::invalid_input, "continue_final_message is set but the final message does not appear in the chat "
                                     "as the template renders it (the template deletes part of it)");
  const bool spacing_kept = std::string_view(out).substr(at, tag.size()) == tag;
  out.resize(at);
  if (!spacing_kept) out.erase(out.find_last_not_of(ws) + 1);  // the template trimmed the content's end
  return out;
}

std::string chat_template::render(const chat_request& r) const {
  if (r.continue_final_message) {
    if (r.add_generation_prompt)
      throw_error(errc::invalid_input, "continue_final_message and add_generation_prompt cannot both be set");
    return render_continuing(r.messages, r.tools, r.extra);
  }
  return render(r.messages, r.tools, r.add_generation_prompt, r.extra);
}

}  // namespace troupe
