// attn-translate for the tiny preset's widths.
#include <attn/cpu.hpp>

#include "translate.hpp"

namespace attn::translator {
int translate_tiny(job& j) { return translate<nn::tiny, cpu>(j); }
}  // namespace attn::translator
