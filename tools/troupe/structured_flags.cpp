#include "tools/troupe/structured_flags.hpp"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"

namespace troupe::cli {

namespace {

std::string read_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(errc::io_error, flag + ": cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

void structured_flags::add_to(CLI::App& app) {
  app.add_option("--json-schema", json_schema_file, "structured output: JSON file with a JSON schema the answer follows");
  app.add_flag("--json-object", json_object, "structured output: the answer is a JSON object");
  app.add_option("--regex", regex, "structured output: the answer matches this regex (ECMAScript)");
  app.add_option("--choice", choices, "structured output: the answer is one of these (repeatable)");
  app.add_option("--grammar", grammar_file, "structured output: GBNF file (llama.cpp's format) the answer follows");
}

wire::structured_output structured_flags::value() const {
  using kind = wire::structured_output::kind;
  const int given = !json_schema_file.empty() + json_object + !regex.empty() + !choices.empty() + !grammar_file.empty();
  if (given > 1)
    throw_error(errc::invalid_argument, "give at most one of --json-schema, --json-object, --regex, --choice, --grammar");
  if (!json_schema_file.empty()) {
    const auto schema = nlohmann::ordered_json::parse(read_file("--json-schema", json_schema_file), nullptr, false);
    if (schema.is_discarded() || !(schema.is_object() || schema.is_boolean()))
      throw_error(errc::invalid_argument, "--json-schema: " + json_schema_file + " is not a JSON schema (an object or a boolean)");
    return {kind::json_schema, schema.dump(), {}};
  }
  if (json_object) return {kind::json_object, "", {}};
  if (!regex.empty()) return {kind::regex, regex, {}};
  if (!choices.empty()) return {kind::choice, "", choices};
  if (!grammar_file.empty()) return {kind::grammar, read_file("--grammar", grammar_file), {}};
  return {};
}

}  // namespace troupe::cli
