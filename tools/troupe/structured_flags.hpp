// The structured-output flags `troupe client` and `troupe generate` share: --json-schema FILE,
// --json-object, --regex R, --choice S (repeatable), --grammar FILE; at most one.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/wire/protocol.hpp"

namespace troupe::cli {

struct structured_flags {
  std::string json_schema_file, regex, grammar_file;
  bool json_object = false;
  std::vector<std::string> choices;

  void add_to(CLI::App& app);
  // The request field (kind none when no flag was given). Files are read and checked here, so a
  // bad one is refused before anything else happens: troupe::error naming the flag and file.
  wire::structured_output value() const;
};

}  // namespace troupe::cli
