// attn-train for one preset's widths in one precision on the CPU. Meson compiles this file
// once for each preset of example_models and activation type of example_precisions
// (examples/meson.build), defining ATTN_PRESET (nn::tiny, ...), ATTN_ACTIVATION (float,
// bfloat16, float16) and ATTN_TRAIN_FUNCTION, the name models.cpp calls it by.
#include <attn/cpu.hpp>

#include "run.hpp"

namespace attn::trainer {
int ATTN_TRAIN_FUNCTION(session& s) { return run<nn::ATTN_PRESET, cpu, ATTN_ACTIVATION>(s); }
}  // namespace attn::trainer
