// `troupe chat`: an interactive chat with a running `troupe serve` (the model's chat template).
// Keeps the conversation and streams each answer; /reset clears it, /think toggles thinking.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "examples/cpp/troupe_client.hpp"
#include "runtime/core/error.hpp"
#include "tools/troupe/command.hpp"

namespace {

using namespace troupe;

int run_chat(int argc, char** argv) {
  CLI::App app{"Chat with a running `troupe serve`", "troupe chat"};
  std::string host = "127.0.0.1", system_prompt;
  uint16_t port = 7711;
  int32_t max_tokens = 512;
  bool thinking = false;
  app.add_option("--host", host);
  app.add_option("--port", port);
  app.add_option("--system", system_prompt, "system message");
  std::string adapter;
  app.add_option("--adapter", adapter, "chat with a LoRA adapter the server serves (troupe serve --lora NAME=DIR)");
  app.add_option("--max-tokens", max_tokens);
  app.add_flag("--thinking", thinking, "let the model think first (Qwen3 enable_thinking)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto c = std::make_unique<client::client>(host, port);
  auto models = c->models();
  std::printf("connected to %s (%s); /reset clears the conversation, /think toggles thinking, Ctrl-D quits\n",
              models.empty() ? "?" : models[0].name.c_str(), (host + ":" + std::to_string(port)).c_str());
  std::vector<wire::chat_message> history;
  if (!system_prompt.empty()) history.push_back({"system", system_prompt, "", ""});
  std::string line;
  for (;;) {
    std::printf("\n> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "/reset") {
      history.resize(system_prompt.empty() ? 0 : 1);
      continue;
    }
    if (line == "/think") {
      thinking = !thinking;
      std::printf("thinking %s\n", thinking ? "on" : "off");
      continue;
    }
    history.push_back({"user", line, "", ""});
    wire::generate_request r;
    r.kind = wire::prompt_kind::messages;
    r.messages = history;
    r.enable_thinking = thinking;
    r.adapter = adapter;
    r.max_tokens = max_tokens;
    std::string answer;
    // A server with idle_timeout_ms closes a connection left quiet while the user types: then
    // this turn goes once more on a new connection (nothing of it had streamed).
    for (int attempt = 0;; ++attempt) {
      try {
        auto s = c->generate(r);
        while (auto t = s.next()) {
          answer += t->text;
          std::fputs(t->text.c_str(), stdout);
          std::fflush(stdout);
        }
        std::printf("\n[%s, %lld tokens]\n", std::string(wire::to_string(s.done().reason)).c_str(),
                    static_cast<long long>(s.done().usage.completion_tokens));
        history.push_back({"assistant", answer, "", ""});
      } catch (const client::request_error& e) {
        std::printf("error: %s\n", e.what());
        history.pop_back();
      } catch (const troupe::error& e) {
        if (attempt == 0 && answer.empty()) {
          c = std::make_unique<client::client>(host, port);
          continue;
        }
        std::printf("error: %s\n", e.what());
        history.pop_back();
      }
      break;
    }
  }
  return 0;
}

}  // namespace

TROUPE_COMMAND("chat", "chat with a running troupe serve", run_chat);
