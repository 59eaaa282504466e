// attn-train for the small preset's widths.
#include <attn/cpu.hpp>

#include "run.hpp"

namespace attn::trainer {
int train_small(session& s) { return run<nn::small, cpu>(s); }
}  // namespace attn::trainer
