// attn-train for the widths of Table 3's row c_d1024.
#include <attn/cpu.hpp>

#include "../run.hpp"

namespace attn::trainer {
int train_table3_c_d1024(session& s) { return run<nn::table3::c_d1024, cpu, float>(s); }
}  // namespace attn::trainer
