// attn-translate for the big preset's widths.
#include <attn/cpu.hpp>

#include "translate.hpp"

namespace attn::translator {
int translate_big(job& j) { return translate<nn::big, cpu>(j); }
}  // namespace attn::translator
