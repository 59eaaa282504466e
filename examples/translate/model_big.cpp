// attn-translate for the big preset's widths.
#include "translate.hpp"

namespace attn::translator {
int translate_big(job& j) { return translate<nn::big>(j); }
}  // namespace attn::translator
