// attn-train for the tiny preset's widths.
#include <attn/cpu.hpp>

#include "run.hpp"

namespace attn::trainer {
int train_tiny(session& s) { return run<nn::tiny, cpu>(s); }
}  // namespace attn::trainer
