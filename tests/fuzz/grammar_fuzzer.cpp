// libFuzzer harness for structured output's parsers, which read request text: the first byte
// picks GBNF, a regex or a JSON schema, the rest is the spec. Each must compile or refuse with
// troupe::error, never crash, hang or grow without bound; what compiles is walked by a matcher
// over the spec's own bytes (masks included). Not part of ctest: tools/fuzz.sh grammar.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/grammar/json_schema_gbnf.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/grammar/regex_gbnf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe::grammar;
  if (size == 0) return 0;
  const std::string spec(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const auto tokens = std::make_shared<const token_table>(
      std::vector<std::string>{"a", "b", "{", "}", "\"", ":", ",", "[", "]", "1", " ", "\xC3", "\xA9", "ab", "\"a\""});
  std::string gbnf;
  try {
    switch (data[0] % 3) {
      case 0: gbnf = spec; break;
      case 1: gbnf = "root ::= " + regex_to_gbnf(spec) + "\n"; break;
      default: {
        const auto schema = nlohmann::ordered_json::parse(spec, nullptr, false);
        if (schema.is_discarded()) return 0;
        gbnf = json_schema_to_gbnf(schema);
      }
    }
    auto g = std::make_shared<const grammar>(parse_gbnf(gbnf));
    matcher m(std::make_shared<automaton>(g, tokens, 256), {99});
    for (size_t i = 0; i < spec.size() && i < 64; ++i) {
      (void)m.allowed_mask();
      if (!m.accept_bytes(spec.substr(i, 1))) break;
    }
  } catch (const troupe::error&) {
    // A refusal naming the problem is the expected outcome for bad specs.
  }
  return 0;
}
