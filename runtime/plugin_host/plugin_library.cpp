#include "runtime/plugin_host/plugin_library.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/core/error.hpp"

namespace troupe::plugin_host {

namespace {

// Every field of the version-1 table. A later header may append fields; the host then reads
// them only when struct_size says the plugin has them.
constexpr size_t k_api_size_v1 = sizeof(troupe_policy_api);

std::string exe_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.parent_path().string();
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || (s.size() > 3 && s.substr(s.size() - 3) == ".so");
}

}  // namespace

std::vector<std::string> search_dirs(const std::vector<std::string>& extra) {
  std::vector<std::string> dirs = extra;
  if (const char* env = std::getenv("TROUPE_PLUGIN_PATH")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      auto colon = rest.find(':');
      auto part = rest.substr(0, colon);
      if (!part.empty()) dirs.emplace_back(part);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  if (auto d = exe_dir(); !d.empty()) dirs.push_back(d + "/../" TROUPE_PLUGIN_INSTALL_LIBDIR);
  dirs.emplace_back(TROUPE_PLUGIN_INSTALL_DIR);
  dirs.emplace_back(TROUPE_PLUGIN_BUILD_DIR);
  return dirs;
}

std::string resolve_plugin(std::string_view name_or_path, const std::vector<std::string>& extra) {
  if (name_or_path.empty())
    throw_error(errc::invalid_argument, "scheduling policy: empty name; expected a policy name such as fcfs or a path to a .so");
  if (looks_like_path(name_or_path)) return std::string(name_or_path);
  std::string file = "troupe_policy_";
  for (char c : name_or_path) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok)
      throw_error(errc::invalid_argument, "scheduling policy name '" + std::string(name_or_path) +
                                              "' has a character other than letters, digits, '-' and '_'; give a path to load a file");
    file += c == '-' ? '_' : c;
  }
  file += ".so";
  std::string looked;
  for (const auto& dir : search_dirs(extra)) {
    std::error_code ec;
    auto candidate = std::filesystem::path(dir) / file;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.lexically_normal().string();
    looked += "\n  " + candidate.string();
  }
  throw_error(errc::invalid_argument, "no scheduling policy plugin '" + std::string(name_or_path) + "': looked for" +
                                          looked + "\nbuilt-in: fcfs, priority, fair-share, shortest-first, cache-aware; "
                                                   "give a path to a .so or set TROUPE_PLUGIN_PATH");
}

std::shared_ptr<const plugin_library> plugin_library::open(const std::string& path) {
  auto bad = [&](errc code, const std::string& why) { throw_error(code, "scheduling policy plugin " + path + ": " + why); };
  // RTLD_NOW: an unresolved symbol fails here, with dlerror's message, not at the first call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) bad(errc::invalid_argument, std::string("cannot be loaded: ") + dlerror());
  std::unique_ptr<void, int (*)(void*)> guard(handle, &dlclose);

  dlerror();
  void* sym = dlsym(handle, TROUPE_POLICY_ENTRY_NAME);
  if (!sym)
    bad(errc::invalid_argument, "has no symbol " TROUPE_POLICY_ENTRY_NAME
                                " (is it a Troupe scheduling policy? build it with troupe_sched_policy.h)");
  auto entry = reinterpret_cast<troupe_policy_entry_fn>(sym);
  const troupe_policy_api* api = nullptr;
  try {
    api = entry(TROUPE_POLICY_ABI_VERSION);
  } catch (...) {
    bad(errc::invalid_argument, TROUPE_POLICY_ENTRY_NAME " threw a C++ exception across the C ABI");
  }
  if (!api)
    bad(errc::unsupported, TROUPE_POLICY_ENTRY_NAME " refused the host's ABI version " +
                               std::to_string(TROUPE_POLICY_ABI_VERSION) + " (returned NULL)");
  if (api->abi_version != TROUPE_POLICY_ABI_VERSION)
    bad(errc::unsupported, "was built for policy ABI version " + std::to_string(api->abi_version) +
                               " but this server speaks version " + std::to_string(TROUPE_POLICY_ABI_VERSION) +
                               "; rebuild it against this server's troupe_sched_policy.h");
  if (api->struct_size < k_api_size_v1)
    bad(errc::unsupported, "its troupe_policy_api is " + std::to_string(api->struct_size) + " bytes, less than the " +
                               std::to_string(k_api_size_v1) + " of ABI version 1: rebuild it against this server's header");
  if (!api->name || !api->name[0]) bad(errc::invalid_argument, "its troupe_policy_api has no name");
  struct required {
    const void* fn;
    const char* field;
  };
  const required fns[] = {{reinterpret_cast<const void*>(api->create), "create"},
                          {reinterpret_cast<const void*>(api->destroy), "destroy"},
                          {reinterpret_cast<const void*>(api->on_waiting), "on_waiting"},
                          {reinterpret_cast<const void*>(api->on_running), "on_running"},
                          {reinterpret_cast<const void*>(api->on_update), "on_update"},
                          {reinterpret_cast<const void*>(api->on_finished), "on_finished"},
                          {reinterpret_cast<const void*>(api->rank_waiting), "rank_waiting"},
                          {reinterpret_cast<const void*>(api->pick_victim), "pick_victim"}};
  for (const auto& f : fns)
    if (!f.fn) bad(errc::invalid_argument, std::string("policy '") + api->name + "' leaves " + f.field + " NULL");
  guard.release();
  return std::shared_ptr<const plugin_library>(new plugin_library(handle, api, path));
}

plugin_library::~plugin_library() { dlclose(handle_); }

}  // namespace troupe::plugin_host
