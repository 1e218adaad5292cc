// Reasoning apart from the answer (reasoning_split): the rule on hand-made outputs, streaming in
// any pieces gives what the whole text gives, the Qwen3 chat template's own reading of
// assistant turns (tests/data/chat_template, rendered by Hugging Face) as the reference, and the
// events of a response that separates them.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/serve/reasoning_split.hpp"
#include "runtime/serve/request_builder.hpp"
#include "runtime/serve/response.hpp"
#include "tests/runtime/serve/qwen_fixture.hpp"

using namespace troupe;
using namespace troupe::serve;
using troupe::serve::test::events_of;
using troupe::serve::test::qwen_facts;

namespace {

struct split_result {
  std::string reasoning, content;
  bool operator==(const split_result&) const = default;
};

std::ostream& operator<<(std::ostream& os, const split_result& r) {
  return os << "{reasoning: '" << r.reasoning << "', content: '" << r.content << "'}";
}

// `text` fed in pieces of `piece` bytes (0: at once).
split_result split(std::string_view text, bool opened, size_t piece = 0) {
  reasoning_split s(opened);
  split_result r;
  auto take = [&](reasoning_split::parts p) {
    r.reasoning += p.reasoning;
    r.content += p.content;
  };
  if (piece == 0) piece = text.size() + 1;
  for (size_t at = 0; at < text.size(); at += piece) take(s.push(text.substr(at, piece)));
  take(s.finish());
  return r;
}

// The same result whatever the pieces: a stream never sends text it has to take back.
split_result split_every_way(std::string_view text, bool opened) {
  const auto whole = split(text, opened);
  for (size_t piece = 1; piece <= 9; ++piece) BOOST_TEST(split(text, opened, piece) == whole, "pieces of " << piece << ": " << text);
  return whole;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reasoning_split_suite)

BOOST_AUTO_TEST_CASE(the_rule) {
  using R = split_result;
  // A think block, then the answer; newlines next to the tags dropped.
  BOOST_TEST((split_every_way("<think>\nadd them\n</think>\n\n4", false) == R{"add them", "4"}));
  BOOST_TEST((split_every_way("<think>a\n\nb</think>c\n\nd", false) == R{"a\n\nb", "c\n\nd"}));
  // The prompt opened the block (Qwen3-Thinking-2507): only the closing tag comes.
  BOOST_TEST((split_every_way("add them\n</think>\n\n4", true) == R{"add them", "4"}));
  // No block: all answer (enable_thinking=false put an empty block in the prompt).
  BOOST_TEST((split_every_way("4", false) == R{"", "4"}));
  BOOST_TEST((split_every_way("\n\n4 </think> <think>", false) == R{"", "\n\n4 </think> <think>"}));
  // Text that only starts like the tag.
  BOOST_TEST((split_every_way("<thin", false) == R{"", "<thin"}));
  BOOST_TEST((split_every_way("<thinking>", false) == R{"", "<thinking>"}));
  // Thinking cut short (max_tokens): all reasoning, a partial closing tag included.
  BOOST_TEST((split_every_way("<think>\nstill going\n\n</thi", false) == R{"still going\n\n</thi", ""}));
  BOOST_TEST((split_every_way("<think>\nstill going\n\n", false) == R{"still going", ""}));
  BOOST_TEST((split_every_way("", true) == R{"", ""}));
  // Only the first closing tag ends the block; the answer keeps the rest as it is.
  BOOST_TEST((split_every_way("<think>x</think>y</think>\n", false) == R{"x", "y</think>\n"}));
  // Newlines inside the reasoning are kept, only those at its ends go.
  BOOST_TEST((split_every_way("<think>\n\na\nb\n\n</think>", false) == R{"a\nb", ""}));
}

// The chat template reads an assistant turn's text the way the split must: reasoning between the
// tags with newlines at its ends stripped, the answer after "</think>" with leading newlines
// stripped. Every assistant turn of the reference conversations is split here and found in the
// text Hugging Face rendered for it.
BOOST_AUTO_TEST_CASE(agrees_with_the_chat_templates_reading_of_assistant_turns) {
  std::ifstream in(TROUPE_TEST_DATA_DIR "/chat_template/cases.jsonl");
  BOOST_REQUIRE(in);
  std::string line;
  int checked = 0, with_reasoning = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const auto& msgs = c["messages"];
    // The template shows reasoning only for turns after the last real user query (a user
    // message that is not a tool response).
    int last_query = -1;
    for (int i = 0; i < static_cast<int>(msgs.size()); ++i) {
      const auto& m = msgs[i];
      if (m["role"] != "user" || !m["content"].is_string()) continue;
      const auto t = m["content"].get<std::string>();
      if (!(t.starts_with("<tool_response>") && t.ends_with("</tool_response>"))) last_query = i;
    }
    for (int i = 0; i < static_cast<int>(msgs.size()); ++i) {
      const auto& m = msgs[i];
      if (m["role"] != "assistant" || m.contains("reasoning_content") || !m["content"].is_string()) continue;
      const auto out = split_every_way(m["content"].get<std::string>(), false);
      const std::string shown = i > last_query ? "<think>\n" + out.reasoning + "\n</think>\n\n" + out.content : out.content;
      BOOST_TEST(c["text"].get<std::string>().find("<|im_start|>assistant\n" + shown) != std::string::npos,
                 c["name"].get<std::string>() << ": " << out);
      ++checked;
      with_reasoning += !out.reasoning.empty();
    }
  }
  BOOST_TEST(checked >= 5);
  BOOST_TEST(with_reasoning >= 3);
}

BOOST_AUTO_TEST_CASE(prompt_opens_reasoning_reads_the_prompts_end) {
  const tokenizer& tok = *qwen_facts().tok;
  BOOST_TEST(prompt_opens_reasoning(tok, tok.encode("<|im_start|>assistant\n<think>\n")));
  BOOST_TEST(prompt_opens_reasoning(tok, tok.encode("<|im_start|>assistant\n<think>")));
  BOOST_TEST(!prompt_opens_reasoning(tok, tok.encode("<|im_start|>assistant\n")));
  BOOST_TEST(!prompt_opens_reasoning(tok, tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n")));
  BOOST_TEST(!prompt_opens_reasoning(tok, std::vector<int32_t>{}));
  BOOST_TEST(!prompt_opens_reasoning(tok, std::vector<int32_t>{151935}));  // a padded row: no text
  // What a chat request renders: Qwen3's template opens no block; enable_thinking=false closes one.
  wire::chat_message user{"user", "Hi", "", ""};
  const auto& m = qwen_facts();
  BOOST_TEST(!prompt_opens_reasoning(tok, tok.encode(m.chat({user}, "", chat_options{true}))));
  BOOST_TEST(!prompt_opens_reasoning(tok, tok.encode(m.chat({user}, "", chat_options{false}))));
}

// A prompt that closed the think block (enable_thinking=false) leaves no block to open: with
// structured output the grammar holds from the first token, <think> masked like any other token
// outside the grammar. (It was allowed, and a random model's unlikely <think> turned its whole
// output into unconstrained reasoning.) A prompt without a block still lets the model think first.
BOOST_AUTO_TEST_CASE(a_closed_think_block_in_the_prompt_starts_the_grammar_at_once) {
  const tokenizer& tok = *qwen_facts().tok;
  BOOST_TEST(prompt_closes_reasoning(tok, tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n")));
  BOOST_TEST(!prompt_closes_reasoning(tok, tok.encode("<|im_start|>assistant\n<think>\n")));
  BOOST_TEST(!prompt_closes_reasoning(tok, tok.encode("<|im_start|>assistant\n")));
  wire::generate_request r;
  r.kind = wire::prompt_kind::messages;
  r.messages = {{"user", "Hi", "", ""}};
  r.separate_reasoning = true;
  r.structured = {wire::structured_output::kind::json_object, "", {}};
  r.enable_thinking = false;
  r.stop_ids = {151645};  // a finished document ends with it
  auto closed = build_generate(r, qwen_facts());
  BOOST_REQUIRE_MESSAGE(closed.req, closed.error.message);
  BOOST_TEST(closed.req->sampling.grammar_think_start == -1);
  BOOST_TEST(closed.req->sampling.grammar_think_end == -1);
  r.enable_thinking = true;
  auto open = build_generate(r, qwen_facts());
  BOOST_REQUIRE_MESSAGE(open.req, open.error.message);
  BOOST_TEST(open.req->sampling.grammar_think_start == *tok.token_to_id("<think>"));
  BOOST_TEST(!open.req->sampling.grammar_in_thinking);
  // A batch decides this per prompt, as each prompt alone (build_generates shares the rest).
  wire::generate_request batch;
  batch.separate_reasoning = true;
  batch.structured = r.structured;
  batch.stop_ids = r.stop_ids;
  for (const char* text : {"<|im_start|>assistant\n<think>\n\n</think>\n\n", "<|im_start|>assistant\n<think>\n",
                           "<|im_start|>assistant\n"})
    batch.prompts.push_back({wire::prompt_kind::text, text, {}});
  const auto built = build_generates(batch, qwen_facts());
  BOOST_REQUIRE(!built.error);
  BOOST_REQUIRE_EQUAL(built.reqs.size(), 3u);
  for (size_t p = 0; p < 3; ++p) {
    auto alone = batch;
    alone.prompts.clear();
    alone.prompt = batch.prompts[p].text;
    const auto want = build_generate(alone, qwen_facts());
    BOOST_REQUIRE(want.req);
    const auto& got = built.reqs[p];
    BOOST_TEST(got.prompt == want.req->prompt, boost::test_tools::per_element());
    BOOST_TEST((got.reasoning_opened_in_prompt == want.req->reasoning_opened_in_prompt), "prompt " << p);
    BOOST_TEST(got.sampling.grammar_think_start == want.req->sampling.grammar_think_start, "prompt " << p);
    BOOST_TEST(got.sampling.grammar_think_end == want.req->sampling.grammar_think_end, "prompt " << p);
    BOOST_TEST(got.sampling.grammar_in_thinking == want.req->sampling.grammar_in_thinking, "prompt " << p);
    BOOST_TEST((got.sampling.grammar == want.req->sampling.grammar), "prompt " << p);  // the cache's one automaton
    BOOST_TEST(got.stop_ids == want.req->stop_ids, boost::test_tools::per_element());
  }
  BOOST_TEST(built.reqs[0].sampling.grammar_think_start == -1);  // closed: the grammar at once
  BOOST_TEST(built.reqs[1].sampling.grammar_in_thinking);        // opened: inside the block
  BOOST_TEST(built.reqs[2].sampling.grammar_think_start == *tok.token_to_id("<think>"));
}

// A response that separates: the answer as `text`, the thinking as `reasoning`, streamed or on
// done; the tool calls come from the answer only.
BOOST_AUTO_TEST_CASE(response_events_carry_both_streams) {
  const tokenizer& tok = *qwen_facts().tok;
  const std::string completion =
      "<think>\nThe user wants Rome's weather; <tool_call> is how.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  const auto ids = tok.encode(completion);
  BOOST_TEST(std::count(ids.begin(), ids.end(), 151668) == 1);  // </think> is one token
  for (bool stream : {true, false}) {
    response r("c1", stream, &tok, {.find_tool_calls = true, .reasoning_opened_in_prompt = false}, 12, clock::now());
    std::string bytes;
    for (int32_t id : ids) r.add_token(id, clock::now(), bytes);
    r.finish(wire::finish_reason::stop, std::nullopt, clock::now(), bytes);
    const auto evs = events_of(bytes);
    std::string text, reasoning;
    size_t token_events = 0;
    for (const auto& e : evs)
      if (const auto* t = std::get_if<wire::token_event>(&e)) {
        BOOST_REQUIRE(t->reasoning.has_value());  // on every event of such a request
        text += t->text;
        reasoning += *t->reasoning;
        token_events += !t->ids.empty();
      }
    const auto& done = std::get<wire::done_event>(evs.back());
    if (!stream) {
      text = done.text;
      reasoning = done.reasoning.value_or("<absent>");
    }
    BOOST_TEST(token_events == (stream ? ids.size() : 0u));
    BOOST_TEST(reasoning == "The user wants Rome's weather; <tool_call> is how.");
    BOOST_TEST(text == "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>");
    // "<tool_call>" inside the thinking is not a call; the one in the answer is.
    BOOST_REQUIRE_EQUAL(done.tool_calls.size(), 1u);
    BOOST_TEST(done.tool_calls[0].arguments == R"({"city":"Rome"})");
  }
  // Without separate_reasoning nothing changes: no reasoning field, the tags in the text.
  response plain("c2", false, &tok, {}, 12, clock::now());
  std::string bytes;
  for (int32_t id : ids) plain.add_token(id, clock::now(), bytes);
  plain.finish(wire::finish_reason::stop, std::nullopt, clock::now(), bytes);
  const auto done = std::get<wire::done_event>(events_of(bytes).back());
  BOOST_TEST(!done.reasoning.has_value());
  BOOST_TEST(done.text == completion);
}

// Stop strings apply to the whole output, tags included; what they end is split as usual.
BOOST_AUTO_TEST_CASE(stop_strings_cut_before_the_split) {
  const tokenizer& tok = *qwen_facts().tok;
  const auto ids = tok.encode("<think>\nweighing it\n</think>\n\nYes. DONE and more");
  response r("c3", false, &tok, {.stop = {"DONE"}, .reasoning_opened_in_prompt = false}, 3, clock::now());
  std::string bytes;
  for (int32_t id : ids)
    if (r.add_token(id, clock::now(), bytes)) break;
  const auto done = std::get<wire::done_event>(events_of(bytes).back());
  BOOST_TEST((done.reason == wire::finish_reason::stop));
  BOOST_TEST(done.reasoning.value_or("") == "weighing it");
  BOOST_TEST(done.text == "Yes. ");
}

BOOST_AUTO_TEST_SUITE_END()
