// A request's structured output (wire::structured_output) as the GBNF its sampler follows: JSON
// schemas and regexes through their converters, choices as literals, GBNF as given. Done when the
// request is built (and parsed there, through grammar::automaton_cache), so a bad schema is a
// clear refusal up front.
#pragma once

#include <string>

#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

// "" for kind none. Throws troupe::error(invalid_argument) saying what is wrong with a JSON
// schema or regex ("json schema: unsupported keyword 'not' at /properties/a", "regex: ..."); GBNF
// errors come when it is parsed ("grammar: line ...").
std::string structured_output_gbnf(const wire::structured_output& s);

}  // namespace troupe::serve
