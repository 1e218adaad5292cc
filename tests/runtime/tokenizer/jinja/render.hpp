// Renders a template string with JSON variables through the Jinja engine (test helper).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/jinja/context.hpp"
#include "runtime/tokenizer/jinja/parser.hpp"

namespace troupe::jinja::test {

inline std::string render(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  body program = parse(source);
  auto globals = builtin_globals();
  for (auto it = vars.begin(); it != vars.end(); ++it) globals[it.key()] = from_json(it.value());
  context ctx(std::move(globals));
  std::string out;
  exec_body(program, ctx, out);
  return out;
}

}  // namespace troupe::jinja::test
