// attn-train for the tiny preset's widths.
#include "run.hpp"

namespace attn::trainer {
int train_tiny(session& s) { return run<nn::tiny>(s); }
}  // namespace attn::trainer
