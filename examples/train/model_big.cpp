// attn-train for the big preset's widths.
#include <attn/cpu.hpp>

#include "run.hpp"

namespace attn::trainer {
int train_big(session& s) { return run<nn::big, cpu>(s); }
}  // namespace attn::trainer
