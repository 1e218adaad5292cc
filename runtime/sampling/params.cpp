// sampling_params from generation_config.json, and the range check every request goes through
// before a sampler is built (so the sampler never sees a value it cannot honour).
#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/sampling/sampler.hpp"

namespace troupe {

sampling_params defaults_from(const generation_defaults& g) {
  sampling_params p;
  // NOTE: do_sample = false (transformers' default) means greedy; the other knobs are still
  // copied, as vLLM copies them regardless of do_sample, so a request that only raises the
  // temperature gets the checkpoint's top_p / top_k / min_p. repetition_penalty applies to greedy
  // decoding too (it reshapes the logits before the argmax).
  p.temperature = g.do_sample ? g.temperature : 0.0f;
  p.top_p = g.top_p;
  p.top_k = g.top_k;
  p.min_p = g.min_p;
  p.repetition_penalty = g.repetition_penalty;
  p.stop_token_ids = g.eos_token_ids;
  return p;
}

namespace {

std::string show(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

[[noreturn]] void reject(const char* field, const std::string& value, const char* allowed) {
  throw_error(errc::invalid_argument,
              std::string("sampling parameter ") + field + " = " + value + " is out of range: " +
                  allowed);
}

}  // namespace

void validate(const sampling_params& p) {
  // Written as "!(in range)" so that NaN, which fails every comparison, is rejected too.
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature)))
    reject("temperature", show(p.temperature), "expected a finite value >= 0 (0 = greedy)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    reject("top_p", show(p.top_p), "expected a value in (0, 1] (1 = off)");
  if (!(p.top_k >= -1))
    reject("top_k", std::to_string(p.top_k), "expected -1, 0 (both off) or a positive count");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
    reject("min_p", show(p.min_p), "expected a value in [0, 1] (0 = off)");
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty)))
    reject("repetition_penalty", show(p.repetition_penalty),
           "expected a finite value > 0 (1 = off)");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    reject("presence_penalty", show(p.presence_penalty), "expected a value in [-2, 2] (0 = off)");
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    reject("frequency_penalty", show(p.frequency_penalty), "expected a value in [-2, 2] (0 = off)");
  if (!(p.thinking_token_budget >= -1))
    reject("thinking_token_budget", std::to_string(p.thinking_token_budget), "expected a count >= 0 (-1 = no budget)");
  if (p.thinking_token_budget >= 0 && p.think_end_id < 0)
    reject("think_end_id", std::to_string(p.think_end_id), "a thinking budget needs the </think> token id");
  if (!(p.min_tokens >= 0))
    reject("min_tokens", std::to_string(p.min_tokens), "expected a count >= 0 (0 = off)");
  for (const auto& [id, bias] : p.logit_bias) {
    const std::string name = "logit_bias[" + std::to_string(id) + "]";
    if (id < 0) reject(name.c_str(), std::to_string(id), "expected a token id >= 0");
    if (!(bias >= -100.0f && bias <= 100.0f)) reject(name.c_str(), show(bias), "expected a bias in [-100, 100]");
  }
  auto check_ids = [](const std::vector<int32_t>& ids, const char* field) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0)
        throw_error(errc::invalid_argument, std::string("sampling parameter ") + field + "[" + std::to_string(i) +
                                                "] = " + std::to_string(ids[i]) + " is out of range: expected a token id >= 0");
  };
  check_ids(p.allowed_token_ids, "allowed_token_ids");
  for (const auto& w : p.bad_words_ids) {
    if (w.empty()) throw_error(errc::invalid_argument, "sampling parameter bad_words_ids holds an empty sequence");
    check_ids(w, "bad_words_ids");
  }
  check_ids(p.min_tokens_stop_ids, "min_tokens_stop_ids");
  check_ids(p.stop_token_ids, "stop_token_ids");
}

}  // namespace troupe
