// attn-translate for the small preset's widths.
#include "translate.hpp"

namespace attn::translator {
int translate_small(job& j) { return translate<nn::small>(j); }
}  // namespace attn::translator
