#include "runtime/serve/response.hpp"

#include "runtime/serve/rerank.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/wire/event_codec.hpp"

namespace troupe::serve {

response::response(std::string client_id, bool stream, const tokenizer* tok, output_rules rules,
                   int64_t prompt_tokens, clock::time_point received)
    : id_(std::move(client_id)),
      stream_(stream),
      text_(tok, std::move(rules.stop), rules.min_tokens, rules.include_stop_str_in_output, rules.skip_special_tokens),
      prompt_tokens_(prompt_tokens),
      received_(received),
      find_tool_calls_(rules.find_tool_calls),
      tool_format_(rules.tool_format),
      tools_json_(std::move(rules.tools_json)),
      index_(rules.index),
      rerank_(rules.rerank),
      labels_(std::move(rules.labels)) {
  prompt_ids_ = std::move(rules.prompt_ids);
  if (rules.reasoning_opened_in_prompt) split_.emplace(*rules.reasoning_opened_in_prompt);
  if (rules.prompt_logprobs) prompt_logprobs_.emplace();
}

void response::add_prompt_logprobs(std::span<const token_logprobs> lps) {
  if (!prompt_logprobs_ || done_) return;
  for (const auto& l : lps) prompt_logprobs_->push_back(wire::logprob_info{l.logprob, l.top, l.id, l.rank});
}

double response::ms_since_received(clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(t - received_).count();
}

void response::set_queue_time(clock::time_point first_scheduled) {
  if (!first_scheduled_) first_scheduled_ = first_scheduled;
}

bool response::add_token(int32_t id, clock::time_point now, std::string& out, const token_logprobs* logprobs) {
  if (done_) return false;
  if (!first_token_) first_token_ = now;
  ids_.push_back(id);
  auto d = text_.push(id);
  std::optional<std::string> reasoning;
  if (split_) {
    auto p = split_->push(d.text);
    d.text = std::move(p.content);
    reasoning = std::move(p.reasoning);
  }
  std::optional<wire::logprob_info> lp;
  if (logprobs) lp = wire::logprob_info{logprobs->logprob, logprobs->top, std::nullopt, std::nullopt};
  if (stream_) {
    wire::token_event t{id_, d.text, {id}, std::move(lp), std::move(reasoning), index_, std::nullopt};
    if (ids_.size() == 1) {  // the first: usage can be counted as it goes
      t.prompt_tokens = prompt_tokens_;
      t.prompt_ids = prompt_ids_;
    }
    wire::append_event_frame(out, t);
  }
  else if (lp) logprobs_.push_back(std::move(*lp));
  if (!stream_ || find_tool_calls_) all_text_ += d.text;
  if (!stream_ && reasoning) all_reasoning_ += *reasoning;
  if (d.stopped) finish(wire::finish_reason::stop, std::nullopt, now, out);
  return d.stopped;
}

void response::finish(wire::finish_reason why, std::optional<wire::wire_error> err, clock::time_point now,
                      std::string& out) {
  if (done_) return;
  done_ = true;
  auto rest = text_.finish();
  std::optional<std::string> rest_reasoning;
  if (split_) {
    auto p = split_->push(rest);
    auto f = split_->finish();
    rest = p.content + f.content;
    rest_reasoning = p.reasoning + f.reasoning;
    all_reasoning_ += *rest_reasoning;
  }
  if (stream_ && (!rest.empty() || (rest_reasoning && !rest_reasoning->empty())))
    wire::append_event_frame(out, wire::token_event{id_, rest, {}, std::nullopt, rest_reasoning, index_, std::nullopt});
  wire::done_event d;
  d.id = id_;
  d.reason = why;
  d.index = index_;
  d.usage = {prompt_tokens_, cached_prompt_tokens_, completion_tokens()};
  d.timings.queue_ms = first_scheduled_ ? ms_since_received(*first_scheduled_) : ms_since_received(now);
  d.timings.ttft_ms = first_token_ ? ms_since_received(*first_token_) : 0.0;
  d.timings.total_ms = ms_since_received(now);
  all_text_ += rest;
  if (!stream_ && !embedding_ && !rerank_ && labels_.empty()) {
    d.has_output = true;
    d.text = all_text_;
    if (split_) d.reasoning = all_reasoning_;
    d.ids = ids_;
    d.logprobs = logprobs_;
  }
  d.prompt_logprobs = std::move(prompt_logprobs_);
  d.prompt_ids = std::move(prompt_ids_);
  if (rerank_ && embedding_ && !embedding_->empty()) {
    d.score = embedding_->front();
  } else if (!labels_.empty()) {
    if (embedding_ && embedding_->size() == labels_.size()) {
      d.label = labels_[likeliest_label(*embedding_)];
      d.probs = std::move(embedding_);
    }
  } else if (!rerank_) {
    d.embedding = std::move(embedding_);
  }
  if (find_tool_calls_ && !err) d.tool_calls = parse_tool_calls(all_text_, tool_format_, tools_json_);
  if (err) {
    d.error = std::move(err);
    d.error->id = id_;
  }
  wire::append_event_frame(out, d);
  // What the request log says of it: the done event without its output.
  outcome_.id = d.id;
  outcome_.reason = d.reason;
  outcome_.index = d.index;
  outcome_.usage = d.usage;
  outcome_.timings = d.timings;
  outcome_.error = std::move(d.error);
}

}  // namespace troupe::serve
