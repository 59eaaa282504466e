// attn-translate for the base preset's widths.
#include <attn/cpu.hpp>

#include "translate.hpp"

namespace attn::translator {
int translate_base(job& j) { return translate<nn::base, cpu>(j); }
}  // namespace attn::translator
