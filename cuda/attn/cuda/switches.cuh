// Roads chosen by the environment: a kernel family stays on unless its variable is "0", so that
// benchmarks time both roads in one program (ATTN_FUSED_TENSOR_CORES, ATTN_ELEMENTWISE_VECTORS,
// ATTN_SMALL_PRODUCTS). Host code.
#pragma once

#include <cstdlib>
#include <string_view>

namespace attn::cuda_backend {

/// Whether `variable` leaves its road on: yes unless it is set to "0".
inline bool on_unless_zero(const char* variable) {
  const char* value = std::getenv(variable);
  return !(value && std::string_view(value) == "0");
}

}  // namespace attn::cuda_backend
