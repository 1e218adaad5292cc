// `troupe client`: one generate request against a running `troupe serve`, streamed to stdout.
// Built from examples/ into the troupe binary (it is also the C++ client library's example).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "examples/cpp/troupe_client.hpp"
#include "runtime/core/error.hpp"
#include "tools/troupe/command.hpp"

namespace {

using namespace troupe;

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("");
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw_error(errc::invalid_argument, "--ids: '" + item + "' is not a token id (expected e.g. --ids 1,2,3)");
    }
  }
  return ids;
}

std::string read_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(errc::io_error, flag + ": cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The structured-output flags as the request's field (at most one of them); files are read and
// checked before connecting.
wire::structured_output structured_from_flags(const std::string& schema_file, bool json_object, const std::string& regex,
                                              const std::vector<std::string>& choices, const std::string& grammar_file) {
  using kind = wire::structured_output::kind;
  const int given = !schema_file.empty() + json_object + !regex.empty() + !choices.empty() + !grammar_file.empty();
  if (given > 1)
    throw_error(errc::invalid_argument, "give at most one of --json-schema, --json-object, --regex, --choice, --grammar");
  if (!schema_file.empty()) {
    const auto schema = nlohmann::ordered_json::parse(read_file("--json-schema", schema_file), nullptr, false);
    if (schema.is_discarded() || !(schema.is_object() || schema.is_boolean()))
      throw_error(errc::invalid_argument, "--json-schema: " + schema_file + " is not a JSON schema (an object or a boolean)");
    return {kind::json_schema, schema.dump(), {}};
  }
  if (json_object) return {kind::json_object, "", {}};
  if (!regex.empty()) return {kind::regex, regex, {}};
  if (!choices.empty()) return {kind::choice, "", choices};
  if (!grammar_file.empty()) return {kind::grammar, read_file("--grammar", grammar_file), {}};
  return {};
}

int run_client(int argc, char** argv) {
  CLI::App app{"Send one generate request to a running `troupe serve` and stream the answer", "troupe client"};
  std::string host = "127.0.0.1", prompt, ids, tools_file;
  uint16_t port = 7711;
  wire::generate_request r;
  std::optional<double> temperature, top_p, min_p;
  std::optional<int32_t> top_k, max_tokens;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool no_stream = false, show_ids = false, chat = false, separate_reasoning = false, json_object = false;
  std::string json_schema_file, regex, grammar_file;
  std::vector<std::string> choices;
  app.add_option("--host", host);
  app.add_option("--port", port);
  app.add_option("--prompt", prompt, "prompt text");
  app.add_option("--ids", ids, "prompt as comma-separated token ids");
  app.add_flag("--chat", chat, "send --prompt as one user chat message");
  app.add_option("--tools", tools_file,
                 "JSON file with an array of OpenAI-style function tools the model may call (implies --chat); "
                 "the calls it makes are printed at the end");
  app.add_option("--max-tokens", max_tokens);
  app.add_option("--temperature", temperature);
  app.add_option("--top-p", top_p);
  app.add_option("--top-k", top_k);
  app.add_option("--min-p", min_p);
  app.add_option("--seed", seed);
  app.add_option("--stop", stop, "stop string (repeatable)");
  app.add_flag("--no-stream", no_stream, "one answer at the end instead of a stream");
  app.add_flag("--show-ids", show_ids, "print the token ids too");
  app.add_flag("--separate-reasoning", separate_reasoning,
               "the model's thinking (<think>...</think>) to stderr, only the answer to stdout");
  app.add_option("--json-schema", json_schema_file, "structured output: JSON file with a JSON schema the answer follows");
  app.add_flag("--json-object", json_object, "structured output: the answer is a JSON object");
  app.add_option("--regex", regex, "structured output: the answer matches this regex (ECMAScript)");
  app.add_option("--choice", choices, "structured output: the answer is one of these (repeatable)");
  app.add_option("--grammar", grammar_file, "structured output: GBNF file (llama.cpp's format) the answer follows");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (ids.empty() == prompt.empty()) throw_error(errc::invalid_argument, "give exactly one of --prompt and --ids");
  if (!ids.empty()) {
    r.kind = wire::prompt_kind::ids;
    r.prompt_ids = parse_ids(ids);
  } else if (chat || !tools_file.empty()) {
    r.kind = wire::prompt_kind::messages;
    r.messages = {{"user", prompt, "", ""}};
    if (!tools_file.empty()) {
      std::ifstream in(tools_file);
      if (!in) throw_error(errc::io_error, "--tools: cannot read " + tools_file);
      const auto tools = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!tools.is_array() || tools.empty())
        throw_error(errc::invalid_argument, "--tools: " + tools_file + " is not a JSON array of tool definitions");
      r.tools_json = tools.dump();
    }
  } else {
    r.kind = wire::prompt_kind::text;
    r.prompt = prompt;
  }
  r.sampling.temperature = temperature;
  r.sampling.top_p = top_p;
  r.sampling.top_k = top_k;
  r.sampling.min_p = min_p;
  r.sampling.seed = seed;
  r.max_tokens = max_tokens;
  r.stop = stop;
  r.stream = !no_stream;
  r.separate_reasoning = separate_reasoning;
  r.structured = structured_from_flags(json_schema_file, json_object, regex, choices, grammar_file);

  client::client c(host, port);
  try {
    auto s = c.generate(r);
    bool thinking = false;  // reasoning printed and not yet ended by a newline
    while (auto t = s.next()) {
      if (t->reasoning && !t->reasoning->empty()) {
        std::fputs(t->reasoning->c_str(), stderr);
        thinking = true;
      }
      if (thinking && !t->text.empty()) {
        std::fputs("\n", stderr);
        thinking = false;
      }
      std::fputs(t->text.c_str(), stdout);
      if (show_ids)
        for (int32_t id : t->ids) std::printf("[%d]", id);
      std::fflush(stdout);
    }
    if (thinking) std::fputs("\n", stderr);
    const auto& d = s.done();
    if (d.has_output) {
      if (d.reasoning) std::fprintf(stderr, "%s\n", d.reasoning->c_str());
      std::fputs(d.text.c_str(), stdout);
      if (show_ids)
        for (int32_t id : d.ids) std::printf("[%d]", id);
    }
    std::printf("\n");
    std::fprintf(stderr,
                 "[%s: %lld prompt (%lld cached) + %lld completion tokens; queue %.1f ms, ttft %.1f ms, total %.1f ms]\n",
                 std::string(wire::to_string(d.reason)).c_str(), static_cast<long long>(d.usage.prompt_tokens),
                 static_cast<long long>(d.usage.cached_prompt_tokens), static_cast<long long>(d.usage.completion_tokens), d.timings.queue_ms, d.timings.ttft_ms,
                 d.timings.total_ms);
    for (const auto& call : d.tool_calls) std::printf("tool call: %s(%s)\n", call.name.c_str(), call.arguments.c_str());
    if (d.error) std::fprintf(stderr, "error: %s: %s\n", std::string(wire::to_string(d.error->code)).c_str(),
                              d.error->message.c_str());
    return d.reason == wire::finish_reason::error ? 1 : 0;
  } catch (const client::request_error& e) {
    std::fprintf(stderr, "troupe client: the server refused the request: %s\n", e.what());
    return 1;
  }
}

}  // namespace

TROUPE_COMMAND("client", "send one request to a running troupe serve", run_client);
