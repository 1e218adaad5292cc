// Sub-command registry of the `troupe` binary: each cmd_*.cpp registers itself, so adding a
// command touches no shared file.
#pragma once

#include <string>
#include <vector>

namespace troupe::cli {

struct command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the sub-command's name
};

std::vector<command>& registry();

struct registrar {
  explicit registrar(command c) { registry().push_back(c); }
};

}  // namespace troupe::cli

#define TROUPE_CLI_CONCAT2(a, b) a##b
#define TROUPE_CLI_CONCAT(a, b) TROUPE_CLI_CONCAT2(a, b)
#define TROUPE_COMMAND(name, summary, fn) \
  static ::troupe::cli::registrar TROUPE_CLI_CONCAT(troupe_cmd_, __LINE__)({name, summary, fn})
