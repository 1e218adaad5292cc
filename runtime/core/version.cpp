#include "runtime/core/version.hpp"

namespace troupe {

// TROUPE_VERSION is defined for this file only (runtime/core/CMakeLists.txt), so a new version
// recompiles one file.
std::string_view version() noexcept { return TROUPE_VERSION; }

}  // namespace troupe
