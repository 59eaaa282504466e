// attn-train for the big preset's widths.
#include "run.hpp"

namespace attn::trainer {
int train_big(session& s) { return run<nn::big>(s); }
}  // namespace attn::trainer
