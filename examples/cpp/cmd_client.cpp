// `troupe client`: one generate request against a running `troupe serve`, streamed to stdout.
// Built from examples/ into the troupe binary (it is also the C++ client library's example).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdint>
#include <fstream>

#include <nlohmann/json.hpp>

#include "examples/cpp/troupe_client.hpp"
#include "runtime/core/error.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/ids_flag.hpp"
#include "tools/troupe/structured_flags.hpp"

namespace {

using namespace troupe;

// The summary line (and any tool calls or error) of one completion's done; the exit status.
int print_done(const wire::done_event& d) {
  std::fprintf(stderr,
               "[%s: %lld prompt (%lld cached) + %lld completion tokens; queue %.1f ms, ttft %.1f ms, total %.1f ms]\n",
               std::string(wire::to_string(d.reason)).c_str(), static_cast<long long>(d.usage.prompt_tokens),
               static_cast<long long>(d.usage.cached_prompt_tokens), static_cast<long long>(d.usage.completion_tokens),
               d.timings.queue_ms, d.timings.ttft_ms, d.timings.total_ms);
  for (const auto& call : d.tool_calls) std::printf("tool call: %s(%s)\n", call.name.c_str(), call.arguments.c_str());
  if (d.error)
    std::fprintf(stderr, "error: %s: %s\n", std::string(wire::to_string(d.error->code)).c_str(),
                 d.error->message.c_str());
  return d.reason == wire::finish_reason::error ? 1 : 0;
}

// n > 1: the completions' streams interleave, so each is printed whole once all have ended.
int print_completions(client::client& c, const wire::generate_request& r, bool show_ids) {
  auto all = c.complete_all(r);
  int status = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& one = all[i];
    std::printf("--- completion %zu ---\n", i);
    if (!one.reasoning.empty()) std::fprintf(stderr, "%s\n", one.reasoning.c_str());
    std::fputs(one.text.c_str(), stdout);
    if (show_ids)
      for (int32_t id : one.ids) std::printf("[%d]", id);
    std::printf("\n");
    std::fflush(stdout);
    status |= print_done(one.done);
  }
  return status;
}

int run_client(int argc, char** argv) {
  CLI::App app{"Send one generate request to a running `troupe serve` and stream the answer", "troupe client"};
  std::string host = "127.0.0.1", prompt, ids, tools_file;
  uint16_t port = 7711;
  wire::generate_request r;
  std::optional<double> temperature, top_p, min_p;
  std::optional<int32_t> top_k, max_tokens, thinking_budget;
  std::optional<uint64_t> seed;
  int32_t n = 1;
  std::vector<std::string> stop;
  bool no_stream = false, show_ids = false, chat = false, separate_reasoning = false;
  cli::structured_flags structured;
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
  app.add_option("--seed", seed, "completion i samples with seed + i");
  app.add_option("--n", n, "completions of the prompt (printed one after another once all have ended)")
      ->check(CLI::Range(1, 128));
  app.add_option("--stop", stop, "stop string (repeatable)");
  bool beam_search = false;
  app.add_flag("--beam-search", beam_search,
               "the --n best beams of a beam search of width --n (use_beam_search), best first");
  std::string adapter, cache_salt;
  app.add_option("--adapter", adapter, "a LoRA adapter the server serves (troupe serve --lora NAME=DIR)");
  app.add_option("--thinking-budget", thinking_budget,
                 "at most this many tokens of Qwen3's thinking, then </think> is forced (thinking_token_budget)")
      ->check(CLI::Range(0, INT32_MAX));
  app.add_option("--cache-salt", cache_salt, "share cached prompt prefixes only with requests of this salt");
  app.add_flag("--no-stream", no_stream, "one answer at the end instead of a stream");
  app.add_flag("--show-ids", show_ids, "print the token ids too");
  app.add_flag("--separate-reasoning", separate_reasoning,
               "the model's thinking (<think>...</think>) to stderr, only the answer to stdout");
  structured.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (ids.empty() == prompt.empty()) throw_error(errc::invalid_argument, "give exactly one of --prompt and --ids");
  if (!ids.empty()) {
    r.kind = wire::prompt_kind::ids;
    r.prompt_ids = cli::parse_ids(ids);
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
  r.structured = structured.value();
  r.n = n;
  r.use_beam_search = beam_search;
  r.adapter = adapter;
  r.thinking_token_budget = thinking_budget;
  r.cache_salt = cache_salt;

  client::client c(host, port);
  try {
    if (r.n > 1 || r.use_beam_search) return print_completions(c, r, show_ids);
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
    return print_done(d);
  } catch (const client::request_error& e) {
    std::fprintf(stderr, "troupe client: the server refused the request: %s\n", e.what());
    return 1;
  }
}

}  // namespace

TROUPE_COMMAND("client", "send one request to a running troupe serve", run_client);
