// `troupe <command> [options]`: dispatches to the registered sub-commands. Every command catches
// its own errors and returns non-zero with one clear message; nothing escapes as a crash.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "runtime/core/error.hpp"
#include "runtime/core/version.hpp"
#include "tools/troupe/command.hpp"

namespace troupe::cli {
std::vector<command>& registry() {
  static std::vector<command> commands;
  return commands;
}
}  // namespace troupe::cli

static void usage(FILE* out) {
  auto cmds = troupe::cli::registry();
  std::sort(cmds.begin(), cmds.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::fprintf(out, "usage: troupe <command> [options]   (troupe <command> --help)\n\ncommands:\n");
  for (const auto& c : cmds) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
}

int main(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("troupe %.*s\n", static_cast<int>(troupe::version().size()), troupe::version().data());
    return 0;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : troupe::cli::registry()) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const troupe::error& e) {
      std::fprintf(stderr, "troupe %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "troupe: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
