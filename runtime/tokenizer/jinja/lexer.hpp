// Jinja lexer: template text -> tokens, applying the whitespace rules transformers renders chat
// templates with (trim_blocks, lstrip_blocks, the '-' and '+' markers, newline normalisation
// and the dropped final newline of Jinja2's default keep_trailing_newline=False).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja {

enum class token_kind {
  text,          // literal output
  var_begin,     // {{
  var_end,       // }}
  block_begin,   // {%
  block_end,     // %}
  name,          // identifier or keyword
  string,        // string literal, unescaped
  integer,
  floating,
  op,            // operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  end,
};

struct token {
  token_kind kind;
  std::string text;
  int line;
};

struct lexer_options {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws troupe::error(unsupported) naming the line for malformed template text.
std::vector<token> lex(std::string_view source, const lexer_options& opt = {});

}  // namespace troupe::jinja
