// Portability macros shared by the host and the CUDA backends.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define ATTN_HOST_DEVICE __host__ __device__
#else
#define ATTN_HOST_DEVICE
#endif

namespace attn {

/// Signed index type, as in Eigen and CuTe: differences of indices stay meaningful.
using index_t = std::ptrdiff_t;

}  // namespace attn
