// The CUDA backend: device memory, the generated elementwise kernel, row reductions, cuBLAS
// contractions and the executor that picks between them. Include it (from .cu files, built by
// nvcc) after or instead of <attn/attn.hpp>'s core and expr layers.
#pragma once

#include <attn/core.hpp>
#include <attn/expr.hpp>

#include "memory.cuh"
#include "elementwise.cuh"
#include "reduce.cuh"
#include "contract.cuh"
#include "affine.cuh"
#include "assign.cuh"
#include "primitives.cuh"
#include "fused_attention.cuh"
