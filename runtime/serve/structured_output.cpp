#include "runtime/serve/structured_output.hpp"

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/json_schema_gbnf.hpp"
#include "runtime/grammar/regex_gbnf.hpp"

namespace troupe::serve {

std::string structured_output_gbnf(const wire::structured_output& s) {
  using kind = wire::structured_output::kind;
  switch (s.k) {
    case kind::none: return {};
    case kind::json_object: return grammar::json_value_gbnf(true);
    case kind::json_schema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(s.spec);
      } catch (const nlohmann::json::exception& e) {
        throw_error(errc::invalid_argument, std::string("json schema: not JSON: ") + e.what());
      }
      return grammar::json_schema_to_gbnf(schema);
    }
    case kind::regex: return "root ::= " + grammar::regex_to_gbnf(s.spec) + "\n";
    case kind::choice: {
      std::string g = "root ::= ";
      for (size_t i = 0; i < s.choices.size(); ++i) g += (i ? " | " : "") + grammar::gbnf_literal(s.choices[i]);
      return g + "\n";
    }
    case kind::grammar: return s.spec;
  }
  return {};
}

}  // namespace troupe::serve
