#include "runtime/serve/request_builder.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <span>

#include "runtime/core/error.hpp"
#include "runtime/serve/reasoning_split.hpp"
#include "runtime/serve/structured_output.hpp"

namespace troupe::serve {

namespace {
wire::wire_error err(wire::error_code c, std::string m) { return {c, std::move(m), {}}; }

wire::wire_error outside_vocab(const std::string& field, int32_t id, int64_t vocab_size) {
  return err(wire::error_code::invalid_value, "field '" + field + "' = " + std::to_string(id) +
                                                  " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
}

// Where the first of `ids` at or past the vocabulary's end is.
std::optional<size_t> first_past(std::span<const int32_t> ids, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab_size) return i;
  return std::nullopt;
}

// The first of `ids` outside the vocabulary, as the error naming it (field[i]).
std::optional<wire::wire_error> first_outside_vocab(const std::string& field, std::span<const int32_t> ids,
                                                    int64_t vocab_size) {
  const auto i = first_past(ids, vocab_size);
  if (!i) return std::nullopt;
  return outside_vocab(field + "[" + std::to_string(*i) + "]", ids[*i], vocab_size);
}

// A text's ids from the tokenizer past the model's vocabulary (a tokenizer larger than the model:
// its added tokens such as <|im_start|>): refused here, as the step would refuse the whole batch.
std::optional<wire::wire_error> encoded_outside_vocab(const std::string& field, std::span<const int32_t> ids,
                                                      const model_facts& m) {
  const auto i = first_past(ids, m.vocab_size);
  if (!i) return std::nullopt;
  return err(wire::error_code::invalid_value,
             "field '" + field + "' encodes to token id " + std::to_string(ids[*i]) + " (token " + std::to_string(*i) +
                 "), outside model '" + m.name + "''s vocabulary (size " + std::to_string(m.vocab_size) +
                 "): the tokenizer is larger than the model");
}
}  // namespace

std::vector<std::vector<int32_t>> bad_words_ids(const tokenizer& tok, const std::vector<std::string>& words) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& w : words) {
    const std::string word = w.substr(w.find_first_not_of(" \t\n\r\f\v"));  // Python's lstrip()
    out.push_back(tok.encode(word));
    // The word after a space tokenizes differently ("Paris" vs " Paris"); vLLM keeps that form
    // too when it is a different first token and the same number of tokens.
    auto spaced = tok.encode(" " + word);
    if (!spaced.empty() && spaced.front() != out.back().front() && spaced.size() == out.back().size())
      out.push_back(std::move(spaced));
  }
  return out;
}

namespace {
// vLLM's truncate_prompt_tokens: the last k tokens of a prompt (-1: as many as fit). A k past
// max_model_len is refused, as vLLM does.
std::optional<wire::wire_error> truncate_prompt(std::vector<int32_t>& ids, std::optional<int32_t> k, const model_facts& m) {
  if (!k) return std::nullopt;
  if (*k > m.max_model_len)
    return err(wire::error_code::invalid_value, "field 'truncate_prompt_tokens' (" + std::to_string(*k) +
                                                    ") exceeds max_model_len (" + std::to_string(m.max_model_len) + ")");
  const auto keep = static_cast<size_t>(*k == -1 ? std::max(m.max_model_len - 1, 1) : *k);
  if (ids.size() > keep) ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
  return std::nullopt;
}

tokenize_result prompt_ids_of(wire::prompt_kind kind, const std::string& text,
                              const std::vector<wire::chat_message>& messages, const chat_options& chat,
                              const std::string& tools_json, const model_facts& m) {
  tokenize_result out;
  if (!m.tok) {
    out.error = err(wire::error_code::unsupported,
                    "model '" + m.name + "' is served without a tokenizer: send 'prompt_ids'");
    return out;
  }
  std::string rendered;
  const std::string* src = &text;
  if (kind == wire::prompt_kind::messages) {
    if (!chat.template_text.empty() && !m.trust_request_chat_template) {
      out.error = err(wire::error_code::unsupported,
                      "field 'chat_template': this server renders chats with its own template only; start it with "
                      "--trust-request-chat-template (model.trust_request_chat_template) to take a request's");
      return out;
    }
    if (!m.chat) {
      out.error = err(wire::error_code::unsupported,
                      "model '" + m.name + "' has no chat template: send 'prompt' or 'prompt_ids'");
      return out;
    }
    try {
      rendered = m.chat(messages, tools_json, chat);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      const bool own_template = what.rfind("chat_template: ", 0) == 0;  // the request's template is bad
      out.error = err(wire::error_code::invalid_value, own_template ? "field '" + what.substr(0, 13) + "'" + what.substr(13)
                                                                    : "messages: " + what);
      return out;
    }
    src = &rendered;
  }
  try {
    m.tok->encode(*src, out.ids);
  } catch (const std::exception& e) {
    out.error = err(wire::error_code::invalid_value, std::string("prompt: ") + e.what());
    return out;
  }
  if (out.ids.empty()) out.error = err(wire::error_code::invalid_value, "the prompt encodes to no tokens");
  return out;
}

// A generate's or tokenize's chat fields as the renderer takes them.
template <class Req>
chat_options chat_options_of(const Req& r, const model_facts& m) {
  return {r.enable_thinking.value_or(m.default_enable_thinking), r.add_generation_prompt, r.continue_final_message,
          r.template_kwargs_json, r.chat_template};
}

template <class Req>
tokenize_result request_prompt_ids(const Req& r, const model_facts& m) {
  return prompt_ids_of(r.kind, r.prompt, r.messages, chat_options_of(r, m), r.tools_json, m);
}
}  // namespace

tokenize_result prompt_ids(const wire::generate_request& r, const model_facts& m) { return request_prompt_ids(r, m); }
tokenize_result prompt_ids(const wire::tokenize_request& r, const model_facts& m) { return request_prompt_ids(r, m); }

embed_build_result build_embed(const wire::generate_request& r, const model_facts& m) {
  embed_build_result res;
  const auto& e = *r.embed;
  if (e.classify && m.num_labels() == 0) {
    res.error = err(wire::error_code::unsupported,
                    "model '" + m.name + "' is not a sequence classifier: classify needs a Qwen3ForSequenceClassification "
                    "checkpoint (a score head of label logits)");
    return res;
  }
  built_embed b;
  b.options.normalize = e.normalize;
  b.options.dimensions = e.dimensions.value_or(0);
  if (e.dimensions && *e.dimensions > m.hidden_size) {
    res.error = err(wire::error_code::invalid_value, "field 'dimensions' (" + std::to_string(*e.dimensions) +
                                                         ") exceeds model '" + m.name + "''s hidden_size (" +
                                                         std::to_string(m.hidden_size) + ")");
    return res;
  }
  const size_t inputs = e.texts.empty() ? e.ids.size() : e.texts.size();
  for (size_t i = 0; i < inputs; ++i) {
    const std::string field = inputs > 1 ? "input[" + std::to_string(i) + "]" : "input";
    if (!e.texts.empty()) {
      if (!m.tok) {
        res.error = err(wire::error_code::unsupported, "model '" + m.name + "' is served without a tokenizer: give '" +
                                                           field + "' as token ids");
        return res;
      }
      b.prompts.push_back(m.tok->encode_with_special_tokens(e.texts[i]));
      if (auto bad = encoded_outside_vocab(field, b.prompts.back(), m)) {
        res.error = *bad;
        return res;
      }
    } else {
      if (auto bad = first_outside_vocab(field, e.ids[i], m.vocab_size)) {
        res.error = *bad;
        return res;
      }
      b.prompts.push_back(e.ids[i]);
    }
    if (auto bad = truncate_prompt(b.prompts.back(), r.truncate_prompt_tokens, m)) {
      res.error = *bad;
      return res;
    }
    const auto n = static_cast<int64_t>(b.prompts.back().size());
    if (n == 0) {
      res.error = err(wire::error_code::invalid_value, "field '" + field + "' encodes to no tokens");
      return res;
    }
    if (n + 1 > m.max_model_len) {
      res.error = err(wire::error_code::prompt_too_long, "field '" + field + "' has " + std::to_string(n) +
                                                             " tokens; max_model_len is " + std::to_string(m.max_model_len));
      return res;
    }
  }
  res.req = std::move(b);
  return res;
}

rerank_build_result build_rerank(const wire::generate_request& r, const model_facts& m) {
  rerank_build_result res;
  const auto& k = *r.rerank;
  if (!m.tok) {
    res.error = err(wire::error_code::unsupported,
                    "model '" + m.name + "' is served without a tokenizer: reranking needs one (its prompt is text)");
    return res;
  }
  if (m.embedding_only) {
    res.error = err(wire::error_code::unsupported, "model '" + m.name +
                                                       "' has no lm_head.weight: it cannot rerank (the score is read "
                                                       "from the logits of \"yes\" and \"no\")");
    return res;
  }
  if (k.queries.size() != 1 && k.queries.size() != k.documents.size()) {
    res.error = err(wire::error_code::invalid_value, "a rerank request needs one query, or one per document (" +
                                                         std::to_string(k.documents.size()) + "); it has " +
                                                         std::to_string(k.queries.size()));
    return res;
  }
  built_rerank b;
  try {
    b.tokens = rerank_tokens_for(*m.tok, m.vocab_size, m.num_labels(), m.name);
    const std::string_view instruction = k.instruction ? std::string_view(*k.instruction) : kDefaultRerankInstruction;
    for (size_t i = 0; i < k.documents.size(); ++i) {
      b.prompts.push_back(rerank_prompt(*m.tok, instruction, k.query_for(i), k.documents[i]));
      if (auto bad = encoded_outside_vocab("documents[" + std::to_string(i) + "]", b.prompts.back(), m)) {
        res.error = *bad;
        return res;
      }
      const auto n = static_cast<int64_t>(b.prompts.back().size());
      if (n + 1 > m.max_model_len) {
        res.error = err(wire::error_code::prompt_too_long,
                        "field 'documents[" + std::to_string(i) + "]' makes a prompt of " + std::to_string(n) +
                            " tokens; max_model_len is " + std::to_string(m.max_model_len));
        return res;
      }
    }
  } catch (const error& e) {  // no "yes" / "no" token, a classifier of several labels, or invalid UTF-8
    res.error = err(e.code() == errc::unsupported ? wire::error_code::unsupported : wire::error_code::invalid_value, e.what());
    return res;
  }
  res.req = std::move(b);
  return res;
}

namespace {

bool fits(const std::vector<int32_t>& prompt, const model_facts& m) {
  return static_cast<int64_t>(prompt.size()) + 1 <= m.max_model_len;
}

// OpenAI Responses' truncation "auto" (wire::generate_request::truncate_messages): the prompt of
// the messages with the fewest oldest turns dropped that fits max_model_len. A turn runs from the
// first message after the leading system ones up to the next user message, so the kept
// conversation starts at a user message (a tool result never loses the call it answers to a cut
// between them) and the instructions stay. Dropping more turns shortens the prompt: a binary
// search renders log2(turns) prompts. When even the last turn alone does not fit, the whole prompt
// comes back and is refused as too long.
tokenize_result truncated_messages_prompt(const wire::generate_request& r, const model_facts& m) {
  auto render = [&](const std::vector<wire::chat_message>& msgs) {
    return prompt_ids_of(r.kind, r.prompt, msgs, chat_options_of(r, m), r.tools_json, m);
  };
  auto whole = render(r.messages);
  if (whole.error || fits(whole.ids, m)) return whole;
  const auto& msgs = r.messages;
  size_t head = 0;
  while (head < msgs.size() && msgs[head].role == "system") ++head;
  std::vector<size_t> cuts;  // where the kept messages may start: each user message after the first turn
  for (size_t i = head + 1; i < msgs.size(); ++i)
    if (msgs[i].role == "user") cuts.push_back(i);
  auto without = [&](size_t cut) {
    std::vector<wire::chat_message> kept(msgs.begin(), msgs.begin() + static_cast<ptrdiff_t>(head));
    kept.insert(kept.end(), msgs.begin() + static_cast<ptrdiff_t>(cut), msgs.end());
    return render(kept);
  };
  if (cuts.empty()) return whole;
  auto shortest = without(cuts.back());
  if (shortest.error || !fits(shortest.ids, m)) return whole;
  size_t lo = 0, hi = cuts.size() - 1;  // cuts[hi] fits; the whole conversation (before cuts[0]) does not
  tokenize_result best = std::move(shortest);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    auto t = without(cuts[mid]);
    if (!t.error && fits(t.ids, m)) {
      hi = mid;
      best = std::move(t);
    } else {
      lo = mid + 1;
    }
  }
  return best;
}

// The request's prompt as ids: checked against the vocabulary, truncated as asked, fitting
// max_model_len with one generated token.
std::optional<wire::wire_error> build_prompt(const wire::generate_request& r, const model_facts& m,
                                             std::vector<int32_t>& prompt) {
  if (r.kind == wire::prompt_kind::ids) {
    if (auto e = first_outside_vocab("prompt_ids", r.prompt_ids, m.vocab_size)) return e;
    prompt = r.prompt_ids;
  } else {
    auto t = r.truncate_messages ? truncated_messages_prompt(r, m) : prompt_ids(r, m);
    if (t.error) return t.error;
    if (auto e = encoded_outside_vocab(r.kind == wire::prompt_kind::messages ? "messages" : "prompt", t.ids, m))
      return e;
    prompt = std::move(t.ids);
  }
  if (auto bad = truncate_prompt(prompt, r.truncate_prompt_tokens, m)) return bad;
  const auto n = static_cast<int64_t>(prompt.size());
  if (!fits(prompt, m))
    return err(wire::error_code::prompt_too_long,
               "prompt has " + std::to_string(n) + " tokens; max_model_len is " + std::to_string(m.max_model_len) +
                   " (the prompt and at least one generated token must fit" +
                   (r.truncate_messages ? "; truncation drops whole turns, and the last turn alone does not fit)" : ")"));
  return std::nullopt;
}

// What b.prompt decides beyond its ids, with separate_reasoning: whether it opened a think block,
// and where a grammar starts. With separate_reasoning the model thinks freely and the grammar
// shapes the answer (vLLM with a reasoning parser); without it, or after a prompt that closed the
// think block (enable_thinking=false), the grammar holds from the first token: letting <think>
// open the output there let a random model's unlikely <think> through, and its whole output was
// then unconstrained "reasoning".
// Qwen3's <think> and </think> ids, when the model has a tokenizer holding both.
std::optional<std::pair<int32_t, int32_t>> think_ids(const model_facts& m) {
  if (!m.tok) return std::nullopt;
  const auto start = m.tok->token_to_id("<think>"), end = m.tok->token_to_id("</think>");
  if (!start || !end) return std::nullopt;
  return std::pair{*start, *end};
}

void apply_prompt_reasoning(const wire::generate_request& r, const model_facts& m, built_request& b) {
  auto& s = b.sampling;
  const bool budget = s.thinking_token_budget >= 0;  // its think ids were found: a tokenizer is there
  if (!budget && (!r.separate_reasoning || !m.tok)) return;
  const bool opened = prompt_opens_reasoning(*m.tok, b.prompt);
  if (budget) s.thinking_opened_in_prompt = opened;
  if (!r.separate_reasoning) return;
  b.reasoning_opened_in_prompt = opened;
  s.grammar_think_start = s.grammar_think_end = -1;
  s.grammar_in_thinking = false;
  if (!s.grammar || prompt_closes_reasoning(*m.tok, b.prompt)) return;
  if (const auto ids = think_ids(m)) {
    s.grammar_think_start = ids->first;
    s.grammar_think_end = ids->second;
    s.grammar_in_thinking = opened;
  }
}

}  // namespace

build_result build_generate(const wire::generate_request& r, const model_facts& m) {
  build_result res;
  if (m.embedding_only) {
    res.error = err(wire::error_code::unsupported,
                    "model '" + m.name + "' is an embedding model (its checkpoint has no lm_head.weight): it serves "
                    "embed requests (POST /v1/embeddings), not generation");
    return res;
  }
  if (m.num_labels() > 0) {
    res.error = err(wire::error_code::unsupported,
                    "model '" + m.name + "' is a sequence classifier (" + std::to_string(m.num_labels()) +
                        " labels, no lm_head): it serves classify, rerank (one label) and embed requests (POST /classify, "
                        "/v1/rerank, /v1/score, /v1/embeddings), not generation");
    return res;
  }
  built_request b;
  if (!r.adapter.empty()) {
    if (auto a = m.adapters ? m.adapters->find(r.adapter) : std::nullopt) {
      b.adapter = a->slot;
      b.adapter_identity = a->identity;
    } else {
      std::string served;
      for (const auto& name : m.adapters ? m.adapters->names() : std::vector<std::string>{}) {
        if (!served.empty()) served += ", ";
        served += name;
      }
      res.error = err(wire::error_code::invalid_value,
                      "adapter '" + r.adapter + "' is not served here; " +
                          (served.empty() ? std::string("this server has no LoRA adapters (troupe serve --lora NAME=DIR)")
                                          : "the LoRA adapters are: " + served));
      return res;
    }
  }
  if (auto e = build_prompt(r, m, b.prompt)) {
    res.error = *e;
    return res;
  }
  if (auto e = first_outside_vocab("stop_ids", r.stop_ids, m.vocab_size)) {
    res.error = *e;
    return res;
  }

  // Exactly what `troupe generate` builds, so both give the same tokens for the same request.
  b.sampling = defaults_from(m.generation);
  const auto& s = r.sampling;
  if (s.temperature) b.sampling.temperature = static_cast<float>(*s.temperature);
  if (s.top_p) b.sampling.top_p = static_cast<float>(*s.top_p);
  if (s.top_k) b.sampling.top_k = *s.top_k;
  if (s.min_p) b.sampling.min_p = static_cast<float>(*s.min_p);
  if (s.repetition_penalty) b.sampling.repetition_penalty = static_cast<float>(*s.repetition_penalty);
  if (s.presence_penalty) b.sampling.presence_penalty = static_cast<float>(*s.presence_penalty);
  if (s.frequency_penalty) b.sampling.frequency_penalty = static_cast<float>(*s.frequency_penalty);
  if (s.seed) {
    b.sampling.seed = *s.seed;
    b.sampling.has_seed = true;
  }
  b.sampling.ignore_eos = r.ignore_eos;
  if (auto e = first_outside_vocab("allowed_token_ids", r.allowed_token_ids, m.vocab_size)) {
    res.error = *e;
    return res;
  }
  b.sampling.allowed_token_ids = r.allowed_token_ids;
  if (!r.bad_words.empty()) {
    if (!m.tok) {
      res.error = err(wire::error_code::unsupported, "field 'bad_words' needs a tokenizer; model '" + m.name +
                                                         "' is served without one");
      return res;
    }
    b.sampling.bad_words_ids = bad_words_ids(*m.tok, r.bad_words);
  }
  for (const auto& [id, bias] : r.logit_bias) {
    if (id >= m.vocab_size) {
      res.error = outside_vocab("logit_bias", id, m.vocab_size);
      return res;
    }
    b.sampling.logit_bias.emplace_back(id, static_cast<float>(bias));
  }
  try {
    validate(b.sampling);
  } catch (const std::exception& e) {
    res.error = err(wire::error_code::invalid_value, e.what());
    return res;
  }
  if (!r.ignore_eos) b.stop_ids = b.sampling.stop_token_ids;
  for (int32_t id : r.stop_ids)
    if (std::find(b.stop_ids.begin(), b.stop_ids.end(), id) == b.stop_ids.end()) b.stop_ids.push_back(id);
  // generation_config's max_new_tokens caps every request, as vLLM reads it.
  b.max_tokens = m.generation.capped(r.max_tokens.value_or(m.default_max_tokens));
  if (r.min_tokens) {
    if (*r.min_tokens > b.max_tokens) {
      res.error = err(wire::error_code::invalid_value, "field 'min_tokens' = " + std::to_string(*r.min_tokens) +
                                                           " is more than max_tokens (" + std::to_string(b.max_tokens) + ")");
      return res;
    }
    // As vLLM: neither the stop ids (EOS unless ignore_eos, and the request's) nor stop strings
    // end the output before min_tokens.
    b.min_tokens = *r.min_tokens;
    b.sampling.min_tokens = *r.min_tokens;
    b.sampling.min_tokens_stop_ids = b.stop_ids;
  }
  b.stop = r.stop;
  b.include_stop_str_in_output = r.include_stop_str_in_output;
  b.skip_special_tokens = r.skip_special_tokens;
  b.logprobs = r.logprobs.value_or(-1);
  b.prompt_logprobs = r.prompt_logprobs.value_or(-1);
  if (r.separate_reasoning) {
    if (!m.tok) {
      res.error = err(wire::error_code::unsupported, "field 'separate_reasoning' needs output text; model '" + m.name +
                                                         "' is served without a tokenizer");
      return res;
    }
  }
  if (r.structured.k != wire::structured_output::kind::none) {
    if (!m.grammars) {
      res.error = err(wire::error_code::unsupported, "structured output needs the model's tokenizer; model '" +
                                                         m.name + "' is served without one");
      return res;
    }
    if (b.stop_ids.empty()) {
      res.error = err(wire::error_code::invalid_value,
                      "structured output ends with a stop id once the grammar is complete, and ignore_eos "
                      "leaves none: give stop_ids or drop ignore_eos");
      return res;
    }
    try {
      b.sampling.grammar = m.grammars->get(structured_output_gbnf(r.structured));
    } catch (const std::exception& e) {
      res.error = err(wire::error_code::invalid_value, std::string("structured output: ") + e.what());
      return res;
    }
    b.sampling.grammar_end_ids = b.stop_ids;
  }
  if (r.thinking_token_budget && *r.thinking_token_budget >= 0) {
    const auto ids = think_ids(m);
    if (!ids) {
      res.error = err(wire::error_code::unsupported,
                      "field 'thinking_token_budget': model '" + m.name + "' " +
                          (m.tok ? "has no <think> and </think> tokens" : "is served without a tokenizer") +
                          ", so its thinking cannot be told apart");
      return res;
    }
    b.sampling.thinking_token_budget = *r.thinking_token_budget;
    b.sampling.think_start_id = ids->first;
    b.sampling.think_end_id = ids->second;
  }
  apply_prompt_reasoning(r, m, b);
  res.req = std::move(b);
  return res;
}

batch_build_result build_generates(const wire::generate_request& r, const model_facts& m) {
  batch_build_result res;
  if (r.prompts.empty()) {
    auto b = build_generate(r, m);
    if (!b.req) res.error = std::move(b.error);
    else res.reqs.push_back(std::move(*b.req));
    return res;
  }
  // The first prompt builds the whole request; the others share all of it but their prompt (the
  // sampling, bad words, grammar: what does not depend on the prompt is built once).
  wire::generate_request one = r;
  one.prompts.clear();
  const auto refuse = [&](size_t p, wire::wire_error e) {
    e.message = "prompts[" + std::to_string(p) + "]: " + e.message;
    res.error = std::move(e);
    res.reqs.clear();
    return res;
  };
  for (size_t p = 0; p < r.prompts.size(); ++p) {
    one.kind = r.prompts[p].kind;
    one.prompt = r.prompts[p].text;
    one.prompt_ids = r.prompts[p].ids;
    if (p == 0) {
      auto b = build_generate(one, m);
      if (!b.req) return refuse(p, std::move(b.error));
      res.reqs.push_back(std::move(*b.req));
      continue;
    }
    built_request b = res.reqs.front();
    if (auto e = build_prompt(one, m, b.prompt)) return refuse(p, std::move(*e));
    apply_prompt_reasoning(one, m, b);
    res.reqs.push_back(std::move(b));
  }
  return res;
}

}  // namespace troupe::serve
