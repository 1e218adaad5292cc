#pragma once
// Troupe's version (CMake's project VERSION), for `troupe --version`, the banner and vLLM's
// GET /version.

#include <string_view>

namespace troupe {

std::string_view version() noexcept;

}  // namespace troupe
