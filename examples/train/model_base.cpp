// attn-train for the base preset's widths.
#include <attn/cpu.hpp>

#include "run.hpp"

namespace attn::trainer {
int train_base(session& s) { return run<nn::base, cpu>(s); }
}  // namespace attn::trainer
