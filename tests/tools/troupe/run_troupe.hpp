// Runs the `troupe` binary under test (TROUPE_BINARY) as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace troupe::testing {

struct run_result {
  int exit_code;
  std::string output;  // stdout and stderr
};

// `troupe <args>` through the shell; the exit code, or 128 + the signal that ended it.
inline run_result run_troupe(const std::string& args) {
  const std::string cmd = std::string(TROUPE_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

}  // namespace troupe::testing
