// A request's structured output (wire::structured_output) compiled to the grammar its sampler
// follows: JSON schemas and regexes through their GBNF converters, choices as literals, GBNF as
// given. Done once per request, when it is built, so a bad schema is a clear refusal up front.
#pragma once

#include <memory>

#include "runtime/grammar/grammar.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

// Null for kind none. Throws troupe::error(invalid_argument) saying what is wrong with the spec
// ("json schema: unsupported keyword 'not' at /properties/a", "regex: ...", "grammar: line ...").
std::shared_ptr<const grammar::grammar> compile_structured_output(const wire::structured_output& s);

// The GBNF text a spec becomes (what compile_structured_output parses); for tests and tools.
std::string structured_output_gbnf(const wire::structured_output& s);

}  // namespace troupe::serve
