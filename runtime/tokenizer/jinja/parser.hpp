// Jinja parser: tokens -> syntax tree, with Jinja2's operator precedence. Tags outside the
// subset (extends, include, import, call, filter blocks, raw, ...) are refused when the template
// is loaded, naming the line, rather than rendered wrongly later.
#pragma once

#include <string_view>

#include "runtime/tokenizer/jinja/ast.hpp"
#include "runtime/tokenizer/jinja/lexer.hpp"

namespace troupe::jinja {

// Throws troupe::error(unsupported) with the line of the first problem.
body parse(std::string_view source, const lexer_options& opt = {});

}  // namespace troupe::jinja
