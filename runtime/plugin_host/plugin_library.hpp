// A scheduling-policy plugin on disk: finds it by name or path, dlopens it and checks its ABI
// (exact version, table size, every required entry point) before anything is called. The
// library stays loaded while any shared_ptr to it lives, so instances never outlive their code.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/troupe_sched_policy.h"

namespace troupe::plugin_host {

// The directories a plugin name is looked up in, in order: `extra` (from the config), then
// $TROUPE_PLUGIN_PATH (colon-separated), <exe>/../<libdir>/troupe/plugins, the install prefix's
// plugin dir and the build tree's.
std::vector<std::string> search_dirs(const std::vector<std::string>& extra);

// The file of "fair-share" is troupe_policy_fair_share.so in the first of search_dirs(extra)
// holding it; a value containing '/' or ending in ".so" is taken as a path. Throws
// troupe::error(invalid_argument) naming every place it looked.
std::string resolve_plugin(std::string_view name_or_path, const std::vector<std::string>& extra);

class plugin_library {
 public:
  // Throws troupe::error: invalid_argument when the file cannot be loaded or is not a policy
  // plugin (no troupe_policy_entry, a NULL table, a missing entry point, no name), unsupported
  // when its ABI version differs from the host's (both versions named).
  static std::shared_ptr<const plugin_library> open(const std::string& path);
  ~plugin_library();
  plugin_library(const plugin_library&) = delete;
  plugin_library& operator=(const plugin_library&) = delete;

  const troupe_policy_api& api() const noexcept { return *api_; }
  const std::string& path() const noexcept { return path_; }
  std::string_view name() const noexcept { return api_->name; }

 private:
  plugin_library(void* handle, const troupe_policy_api* api, std::string path)
      : handle_(handle), api_(api), path_(std::move(path)) {}
  void* handle_;
  const troupe_policy_api* api_;
  std::string path_;
};

}  // namespace troupe::plugin_host
