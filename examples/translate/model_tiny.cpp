// attn-translate for the tiny preset's widths.
#include "translate.hpp"

namespace attn::translator {
int translate_tiny(job& j) { return translate<nn::tiny>(j); }
}  // namespace attn::translator
