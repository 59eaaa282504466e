// attn-translate for the base preset's widths.
#include "translate.hpp"

namespace attn::translator {
int translate_base(job& j) { return translate<nn::base>(j); }
}  // namespace attn::translator
