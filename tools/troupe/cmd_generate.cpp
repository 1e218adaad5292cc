// `troupe generate` and `troupe logits`: one request through the engine, no server.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/draft_sequence.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/sched/draft_length.hpp"
#include "runtime/sched/ngram_proposer.hpp"
#include "runtime/grammar/automaton.hpp"
#include "runtime/serve/output_text.hpp"
#include "runtime/serve/structured_output.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/ids_flag.hpp"
#include "tools/troupe/model_flags.hpp"
#include "tools/troupe/structured_flags.hpp"

namespace {

using namespace troupe;

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate a completion for one prompt (no server)", "troupe generate"};
  std::string model, ids_text, prompt_text, speculative_model;
  int32_t max_tokens = 64, prefill_chunk = 0, speculative_tokens = 0;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence = 0, frequency = 0;
  std::optional<uint64_t> seed;
  bool json = false, ignore_eos = false;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory")->required();
  auto* prompt_opt = app.add_option("--prompt", prompt_text, "prompt text (needs the model's tokenizer.json)");
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids")->excludes(prompt_opt);
  app.add_option("--max-tokens", max_tokens, "tokens to generate");
  app.add_option("--temperature", temperature, "0 = greedy (default from generation_config.json)");
  app.add_option("--top-p", top_p);
  app.add_option("--top-k", top_k);
  app.add_option("--min-p", min_p);
  app.add_option("--repetition-penalty", repetition_penalty);
  app.add_option("--presence-penalty", presence);
  app.add_option("--frequency-penalty", frequency);
  app.add_option("--seed", seed, "sampling seed (same seed, same tokens)");
  app.add_option("--prefill-chunk", prefill_chunk, "prefill the prompt in chunks of N tokens (0 = one step)");
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at the end-of-sequence ids");
  app.add_option("--speculative-tokens", speculative_tokens,
                 "prompt-lookup drafts per decode step, verified in the step: the same ids, fewer steps where the "
                 "text repeats (docs/speculative.md)")
      ->check(CLI::Range(0, 64));
  app.add_option("--speculative-model", speculative_model,
                 "a draft model (a smaller Qwen3 of the same vocabulary) guesses the --speculative-tokens instead of "
                 "prompt lookup: the same ids, fewer steps of the model when it guesses right");
  bool fixed_draft_length = false;
  app.add_flag("--fixed-draft-length", fixed_draft_length,
               "with --speculative-model: always guess --speculative-tokens tokens (default: as many as the "
               "draft's acceptance so far pays for, as troupe serve's speculative.adaptive_draft_length)");
  app.add_flag("--json", json, "print {\"ids\": [...]} instead of the ids as text");
  cli::model_flags model_flags;
  model_flags.add_to(app);
  cli::structured_flags structured_flags;
  structured_flags.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const wire::structured_output structured = structured_flags.value();

  if (prompt_text.empty() && ids_text.empty())
    throw_error(errc::invalid_argument, "give the prompt as --prompt TEXT or --ids 1,2,3");
  auto m = model_flags.load(model);
  const auto& ck = m.ck;
  std::unique_ptr<tokenizer> tok;
  std::vector<int32_t> prompt;
  if (!prompt_text.empty()) {
    tok = std::make_unique<tokenizer>(model);
    prompt = tok->encode(prompt_text);
  } else {
    prompt = cli::parse_ids(ids_text);
  }
  cli::check_ids_in_vocab(prompt, ck->config.vocab_size);
  generate_options o = m.run_options();
  o.max_tokens = ck->generation.capped(max_tokens);
  o.prefill_chunk = prefill_chunk;
  o.sampling = defaults_from(ck->generation);
  if (temperature) o.sampling.temperature = *temperature;
  if (top_p) o.sampling.top_p = *top_p;
  if (top_k) o.sampling.top_k = *top_k;
  if (min_p) o.sampling.min_p = *min_p;
  if (repetition_penalty) o.sampling.repetition_penalty = *repetition_penalty;
  o.sampling.presence_penalty = presence;
  o.sampling.frequency_penalty = frequency;
  if (seed) {
    o.sampling.seed = *seed;
    o.sampling.has_seed = true;
  }
  o.sampling.ignore_eos = ignore_eos;
  if (structured.k != wire::structured_output::kind::none) {
    // As the server builds it (request_builder.cpp): the grammar over the tokenizer's bytes,
    // ended by the stop ids once complete.
    if (!tok) tok = std::make_unique<tokenizer>(model);
    o.sampling.grammar_end_ids = ignore_eos ? std::vector<int32_t>{} : o.sampling.stop_token_ids;
    if (o.sampling.grammar_end_ids.empty())
      throw_error(errc::invalid_argument, "structured output ends with a stop id once the grammar is complete, and "
                                          "--ignore-eos leaves none");
    o.sampling.grammar = std::make_shared<grammar::automaton>(
        std::make_shared<const grammar::grammar>(grammar::parse_gbnf(serve::structured_output_gbnf(structured))),
        grammar::token_table::from_tokenizer(*tok));
  }

  std::unique_ptr<checkpoint> draft_ck;
  // The draft model's guesses, as many each step as its acceptance so far pays for
  // (sched::draft_length; a guess costs the draft's weight bytes over the model's).
  struct draft_state {
    std::unique_ptr<draft_sequence> seq;
    sched::draft_length length;
    std::vector<int32_t> last;  // the guesses after `last_at` context tokens
    size_t last_at = 0;
    bool started = false;
    int64_t guessed = 0;
  };
  std::shared_ptr<draft_state> draft;
  if (!speculative_model.empty()) {
    if (speculative_tokens <= 0)
      throw_error(errc::invalid_argument, "--speculative-model needs --speculative-tokens N > 0: the tokens it guesses a step");
    draft_ck = quant::load_model(speculative_model, {});
    if (const auto why = draft_model_problem(*draft_ck, *ck); !why.empty())
      throw_error(errc::invalid_argument, "--speculative-model " + speculative_model + ": " + why);
    const double cost = fixed_draft_length ? 0.0 : draft_guess_cost(*draft_ck, *ck);
    draft = std::make_shared<draft_state>(draft_state{
        std::make_unique<draft_sequence>(*draft_ck, static_cast<int64_t>(prompt.size()) + o.max_tokens + speculative_tokens,
                                         ck->config.vocab_size, speculative_tokens),
        sched::draft_length(cost, speculative_tokens), {}, 0, false, 0});
    o.propose = [d = draft](std::span<const int32_t> context, int32_t max_drafts) {
      if (d->started) {  // the step since the last call verified d->last: how many held
        int32_t held = 0;
        while (static_cast<size_t>(held) < d->last.size() && d->last_at + static_cast<size_t>(held) < context.size() &&
               context[d->last_at + static_cast<size_t>(held)] == d->last[static_cast<size_t>(held)])
          ++held;
        d->length.stepped(static_cast<int32_t>(d->last.size()), held, !d->last.empty());
      }
      d->started = true;
      d->last = d->seq->propose(context, std::min(d->length.want(), max_drafts));
      d->last_at = context.size();
      d->guessed += static_cast<int64_t>(d->last.size());
      return d->last;
    };
  } else if (speculative_tokens > 0) {
    sched::ngram_options ngram;  // the server's default suffix lengths
    ngram.num_tokens = speculative_tokens;
    o.propose = [ngram](std::span<const int32_t> context, int32_t max_drafts) {
      return sched::propose_ngram_drafts(context, ngram, max_drafts);
    };
  }

  generator gen(*ck, m.parallel, m.engines);
  // The server's output text (no stop strings): special tokens and a model's padded vocabulary
  // rows have no text there, so `generate` prints what a client of `troupe serve` receives.
  std::optional<serve::output_text> text;
  if (tok) text.emplace(tok.get(), std::vector<std::string>{});
  std::string full_text;
  auto out = gen.generate(prompt, o, [&](int32_t id) {
    if (text) {
      std::string delta = text->push(id).text;
      full_text += delta;
      if (!json) std::fputs(delta.c_str(), stdout);
    } else if (!json) {
      std::printf("%d ", id);
    }
    std::fflush(stdout);
  });
  if (text) full_text += text->finish();
  if (json) {
    nlohmann::json j{{"ids", out.ids}, {"finish_reason", out.finish_reason}};
    if (text) j["text"] = full_text;
    if (speculative_tokens > 0) {
      j["decode_steps"] = out.decode_steps;
      j["accepted_drafts"] = out.accepted_drafts;
      if (draft) j["draft_tokens"] = draft->guessed;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\n");
  }
  return 0;
}

int run_logits(int argc, char** argv) {
  CLI::App app{"Write the float32 logits of every prompt position", "troupe logits"};
  std::string model, ids_text, out_path;
  int32_t prefill_chunk = 0;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory")->required();
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids")->required();
  app.add_option("--out", out_path, "output file: little-endian float32 [n_ids, vocab_size]")->required();
  app.add_option("--prefill-chunk", prefill_chunk, "prefill in chunks of N tokens (0 = one step)");
  cli::model_flags model_flags;
  model_flags.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const auto m = model_flags.load(model);
  auto prompt = cli::parse_ids(ids_text);
  cli::check_ids_in_vocab(prompt, m.ck->config.vocab_size);
  generator gen(*m.ck, m.parallel, m.engines);
  auto logits = gen.prompt_logits(prompt, prefill_chunk, m.kv_type, {m.compute}, m.adapter);
  std::ofstream f(out_path, std::ios::binary);
  if (!f) throw_error(errc::io_error, "cannot write " + out_path);
  f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!f) throw_error(errc::io_error, "short write to " + out_path);
  return 0;
}

}  // namespace

TROUPE_COMMAND("generate", "generate a completion for one prompt", run_generate);
TROUPE_COMMAND("logits", "write the logits of every prompt position", run_logits);
