// attn-train for the base preset's widths.
#include "run.hpp"

namespace attn::trainer {
int train_base(session& s) { return run<nn::base>(s); }
}  // namespace attn::trainer
