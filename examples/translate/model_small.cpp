// attn-translate for the small preset's widths.
#include <attn/cpu.hpp>

#include "translate.hpp"

namespace attn::translator {
int translate_small(job& j) { return translate<nn::small, cpu>(j); }
}  // namespace attn::translator
