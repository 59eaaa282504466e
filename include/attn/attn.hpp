// attn: the Transformer of "Attention Is All You Need" as shape-checked tensor expressions.
// Layers, lowest first; see docs/architecture.md.
#pragma once

#include "version.hpp"
#include "core.hpp"
#include "expr.hpp"
#include "cpu.hpp"
#include "grad.hpp"
#include "nn.hpp"
#include "train.hpp"
