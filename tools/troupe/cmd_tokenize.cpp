// `troupe tokenize`, `troupe detokenize` and `troupe chat-template`: the tokenizer and chat
// template as line-oriented JSON filters (one request per stdin line, one JSON line out).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/chat_template.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"

namespace {

using namespace troupe;
using ojson = nlohmann::ordered_json;

// Runs `fn` on every stdin line; a bad line stops with its number in the message.
template <class Fn>
int for_each_line(const char* command, Fn&& fn) {
  std::string line;
  size_t number = 0;
  std::string out;
  while (std::getline(std::cin, line)) {
    ++number;
    if (line.empty()) continue;
    out.clear();
    try {
      fn(line, out);
    } catch (const nlohmann::json::exception& e) {
      std::fprintf(stderr, "troupe %s: error: stdin line %zu: %s\n", command, number, e.what());
      return 1;
    } catch (const troupe::error& e) {
      std::fprintf(stderr, "troupe %s: error: stdin line %zu: %s\n", command, number, e.what());
      return 1;
    }
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out.push_back('[');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.append(", ");
    out.append(std::to_string(ids[i]));
  }
  out.push_back(']');
}

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Encode text: one JSON string per stdin line -> {\"ids\": [...]} per line", "troupe tokenize"};
  std::string model;
  app.add_option("--model", model, "model directory with tokenizer.json")->required();
  CLI11_PARSE(app, argc, argv);
  tokenizer tok(model);
  std::vector<int32_t> ids;
  return for_each_line("tokenize", [&](const std::string& line, std::string& out) {
    auto j = nlohmann::json::parse(line);
    if (!j.is_string()) throw_error(errc::invalid_input, "expected a JSON string, got " + std::string(j.type_name()));
    ids.clear();
    tok.encode(j.get_ref<const std::string&>(), ids);
    out.append("{\"ids\": ");
    append_ids(out, ids);
    out.push_back('}');
  });
}

int run_detokenize(int argc, char** argv) {
  CLI::App app{"Decode ids: one {\"ids\": [...]} (or bare array) per stdin line -> a JSON string per line",
               "troupe detokenize"};
  std::string model;
  bool skip_special = false;
  app.add_option("--model", model, "model directory with tokenizer.json")->required();
  app.add_flag("--skip-special-tokens", skip_special, "leave out special tokens (<|im_end|>, ...)");
  CLI11_PARSE(app, argc, argv);
  tokenizer tok(model);
  return for_each_line("detokenize", [&](const std::string& line, std::string& out) {
    auto j = nlohmann::json::parse(line);
    const nlohmann::json* arr = &j;
    if (j.is_object()) {
      if (!j.contains("ids")) throw_error(errc::invalid_input, "expected {\"ids\": [...]}: no \"ids\"");
      arr = &j["ids"];
    }
    if (!arr->is_array()) throw_error(errc::invalid_input, "expected an array of token ids");
    std::vector<int32_t> ids;
    ids.reserve(arr->size());
    for (const auto& v : *arr) {
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
        throw_error(errc::invalid_input, "expected integer token ids, got " + v.dump());
      ids.push_back(v.get<int32_t>());
    }
    out = nlohmann::json(tok.decode(ids, skip_special)).dump();
  });
}

int run_chat_template(int argc, char** argv) {
  CLI::App app{"Render chats: one {\"messages\": [...], \"tools\"?, \"add_generation_prompt\"?, "
               "\"continue_final_message\"?, \"enable_thinking\"?} "
               "per stdin line -> {\"text\": ..., \"ids\": [...]} per line",
               "troupe chat-template"};
  std::string model;
  std::string custom;
  app.add_option("--model", model, "model directory with tokenizer.json and tokenizer_config.json")->required();
  app.add_option("--chat-template", custom, "a template file, or the template itself, instead of the model's (as troupe serve's)");
  CLI11_PARSE(app, argc, argv);
  tokenizer tok(model);
  chat_template tmpl = chat_template::from_directory(model, custom);
  std::vector<int32_t> ids;
  return for_each_line("chat-template", [&](const std::string& line, std::string& out) {
    ojson req = ojson::parse(line);
    if (!req.is_object()) throw_error(errc::invalid_input, "expected a JSON object with \"messages\"");
    chat_request r;
    for (auto it = req.begin(); it != req.end(); ++it) {
      const std::string& k = it.key();
      if (k == "messages") {
        r.messages = it.value();
      } else if (k == "tools") {
        r.tools = it.value();
      } else if (k == "add_generation_prompt") {
        if (!it.value().is_boolean()) throw_error(errc::invalid_input, "\"add_generation_prompt\" must be true or false");
        r.add_generation_prompt = it.value().get<bool>();
      } else if (k == "continue_final_message") {
        if (!it.value().is_boolean()) throw_error(errc::invalid_input, "\"continue_final_message\" must be true or false");
        r.continue_final_message = it.value().get<bool>();
      } else if (k == "enable_thinking") {
        r.extra["enable_thinking"] = it.value();
      } else {
        throw_error(errc::invalid_input, "unknown key \"" + k +
                                             "\" (expected messages, tools, add_generation_prompt, "
                                             "continue_final_message, enable_thinking)");
      }
    }
    if (r.messages.is_null()) throw_error(errc::invalid_input, "no \"messages\"");
    std::string text = tmpl.render(r);
    ids.clear();
    tok.encode(text, ids);
    out.append("{\"text\": ");
    out.append(ojson(text).dump());
    out.append(", \"ids\": ");
    append_ids(out, ids);
    out.push_back('}');
  });
}

}  // namespace

TROUPE_COMMAND("tokenize", "text -> token ids (JSON lines on stdin)", run_tokenize);
TROUPE_COMMAND("detokenize", "token ids -> text (JSON lines on stdin)", run_detokenize);
TROUPE_COMMAND("chat-template", "chat messages -> prompt text and ids (JSON lines on stdin)", run_chat_template);
