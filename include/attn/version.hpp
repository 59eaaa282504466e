// The library's version, for consumers that want to check what they built against.
#pragma once

#define ATTN_VERSION_MAJOR 0
#define ATTN_VERSION_MINOR 1
#define ATTN_VERSION_PATCH 0
#define ATTN_VERSION_STRING "0.1.0"

namespace attn {

/// The version of the attn headers in use, as "major.minor.patch".
constexpr const char* version() noexcept { return ATTN_VERSION_STRING; }

}  // namespace attn
