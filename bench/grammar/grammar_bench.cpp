// Cost of structured output per generated token, at Qwen3's vocab: a document is tokenized and
// fed to a matcher token by token, each step doing what the sampler does (mask a 151,936 logits
// row, then accept the token). The first mask of a state walks the vocabulary trie; later ones
// are cached in the grammar's automaton, so the cost is front-loaded: printed as the mean, p50,
// p99 and max per token, and the whole request, for a cold automaton (the first request with a
// format) and a warm one (the next requests with it). Also the one-off costs: the token table
// (once per server) and compiling the grammar (once per format).
// Usage: grammar_bench [tokenizer_dir=models/qwen3-tokenizer]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/grammar/matcher.hpp"
#include "runtime/sampling/sampler.hpp"
#include "runtime/serve/structured_output.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

const char* kDocument = R"({"id": 48213, "name": "Ada Lovelace", "email": "ada@example.org", "active": true,
  "score": 97.25, "tags": ["math", "poetry", "engines", "notes"], "address": {"city": "London",
  "street": "12 St James's Square", "postcode": "SW1Y 4JH"}, "bio": "Wrote the first published algorithm for Babbage's Analytical Engine; she imagined machines composing music. Café, naïve, 数学, Ωμέγα.",
  "born": "1815-12-10", "children": [{"name": "Byron", "born": "1836-05-12"}, {"name": "Anne Isabella",
  "born": "1837-09-22"}, {"name": "Ralph Gordon", "born": "1839-07-02"}]})";

const char* kSchema = R"({"type": "object", "properties": {
  "id": {"type": "integer", "minimum": 0}, "name": {"type": "string"}, "email": {"type": "string"},
  "active": {"type": "boolean"}, "score": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "street": {"type": "string"},
              "postcode": {"type": "string"}}, "required": ["city", "street", "postcode"]},
  "bio": {"type": "string"}, "born": {"type": "string", "format": "date"},
  "children": {"type": "array", "items": {"$ref": "#/$defs/child"}}},
  "required": ["id", "name", "email", "active", "score", "tags", "address", "bio", "born", "children"],
  "$defs": {"child": {"type": "object", "properties": {"name": {"type": "string"},
            "born": {"type": "string", "format": "date"}}, "required": ["name", "born"]}}})";

struct pass {
  std::vector<double> per_token;  // ms, sorted
  double total_ms = 0;
  bool ok = true, ends = false;
};

// What the sampler does per token with a grammar: mask a row, accept the token.
pass feed(troupe::grammar::matcher& m, const std::vector<int32_t>& ids) {
  pass p;
  std::vector<float> row(151936, 0.0f);
  const auto start = clock_type::now();
  for (int32_t id : ids) {
    const auto t0 = clock_type::now();
    std::fill(row.begin(), row.end(), 0.0f);
    m.mask_logits(row);
    if (row[static_cast<size_t>(id)] != 0.0f || !m.accept_token(id)) {
      p.ok = false;
      return p;
    }
    p.per_token.push_back(ms_since(t0));
  }
  p.total_ms = ms_since(start);
  std::fill(row.begin(), row.end(), 0.0f);
  m.mask_logits(row);
  p.ends = row[151645] == 0.0f;
  std::sort(p.per_token.begin(), p.per_token.end());
  return p;
}

// A cold request (a fresh automaton), then a warm one: a second request with the same format,
// sharing the first one's automaton as the server's automaton_cache arranges.
void run(const char* label, const troupe::wire::structured_output& spec, const std::string& text,
         const troupe::tokenizer& tok, const std::shared_ptr<const troupe::grammar::token_table>& table) {
  auto t0 = clock_type::now();
  auto g = std::make_shared<const troupe::grammar::grammar>(
      troupe::grammar::parse_gbnf(troupe::serve::structured_output_gbnf(spec)));
  const double compile_ms = ms_since(t0);
  const std::vector<int32_t> ids = tok.encode(text);
  auto shared = std::make_shared<troupe::grammar::automaton>(g, table);
  for (const char* kind : {"cold", "warm"}) {
    troupe::grammar::matcher m(shared, {151645});
    const pass p = feed(m, ids);
    if (!p.ok) {
      std::printf("%-12s a token of the document is not allowed: the grammar and document disagree\n", label);
      return;
    }
    const size_t n = p.per_token.size();
    std::printf("%-12s %s %5zu tokens  compile %5.2f ms  per token: mean %6.3f  p50 %6.3f  p99 %6.3f  max %6.3f ms"
                "  request %6.1f ms  states %5zu  ends %s\n",
                label, kind, n, compile_ms, p.total_ms / static_cast<double>(n), p.per_token[n / 2],
                p.per_token[std::min(n - 1, n * 99 / 100)], p.per_token[n - 1], p.total_ms, m.num_states(),
                p.ends ? "yes" : "NO");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "models/qwen3-tokenizer";
  const troupe::tokenizer tok(dir);
  auto t0 = clock_type::now();
  const auto table = troupe::grammar::token_table::from_tokenizer(tok);
  std::printf("token table: %zu ids, %zu trie nodes, built in %.1f ms (once per server)\n", table->id_limit(),
              table->nodes().size(), ms_since(t0));
  // For scale, in the same run: what the sampler itself costs per token (greedy, same row size).
  {
    troupe::sampling_params p;
    p.temperature = 0;
    troupe::sampler smp(p);
    std::vector<float> row(151936);
    std::vector<double> us;
    for (int i = 0; i < 200; ++i) {
      for (size_t j = 0; j < row.size(); ++j) row[j] = static_cast<float>((j * 2654435761u) % 1000) / 100.0f;
      t0 = clock_type::now();
      volatile int32_t id = smp.sample(row, {}, {});
      (void)id;
      us.push_back(ms_since(t0));
    }
    std::sort(us.begin(), us.end());
    std::printf("for scale: sampler::sample, greedy, one row: p50 %.3f ms\n", us[us.size() / 2]);
  }
  using kind = troupe::wire::structured_output::kind;
  run("json_object", {kind::json_object, "", {}}, kDocument, tok, table);
  run("json_schema", {kind::json_schema, kSchema, {}}, kDocument, tok, table);
  std::string lines;
  for (int i = 0; i < 40; ++i) lines += "INV-" + std::to_string(10000 + i * 37) + " qty=" + std::to_string(i % 9 + 1) + "; ";
  run("regex", {kind::regex, "(INV-[0-9]{5} qty=[1-9]; )+", {}}, lines, tok, table);
  run("choice", {kind::choice, "", {"The Analytical Engine weaves algebraic patterns", "The Difference Engine"}},
      "The Analytical Engine weaves algebraic patterns", tok, table);
  return 0;
}
