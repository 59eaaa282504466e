// The CPU backend: expressions lowered to Eigen, contractions to (OpenBLAS) GEMM, OpenMP threads.
#pragma once

#include "cpu/assign.hpp"
#include "cpu/contract.hpp"
#include "cpu/eigen.hpp"
#include "cpu/evaluate.hpp"
#include "cpu/fused_attention.hpp"
#include "cpu/lowering.hpp"
#include "cpu/reduce.hpp"
#include "cpu/primitives.hpp"
#include "cpu/threads.hpp"
