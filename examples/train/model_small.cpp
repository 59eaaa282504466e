// attn-train for the small preset's widths.
#include "run.hpp"

namespace attn::trainer {
int train_small(session& s) { return run<nn::small>(s); }
}  // namespace attn::trainer
