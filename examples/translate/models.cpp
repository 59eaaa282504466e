// The widths attn-translate is compiled for: the presets attn-train trains. Each is a
// translation unit of its own (model_*.cpp), so that they compile in parallel.
#include <attn/nn/config.hpp>

#include "job.hpp"

namespace attn::translator {

#if defined(ATTN_MODEL_TINY)
int translate_tiny(job&);
#endif
#if defined(ATTN_MODEL_SMALL)
int translate_small(job&);
#endif
#if defined(ATTN_MODEL_BASE)
int translate_base(job&);
#endif
#if defined(ATTN_MODEL_BIG)
int translate_big(job&);
#endif

std::span<const compiled_model> compiled_models() {
  static const compiled_model models[] = {
#if defined(ATTN_MODEL_TINY)
      {"tiny", widths_of<nn::tiny>(), translate_tiny},
#endif
#if defined(ATTN_MODEL_SMALL)
      {"small", widths_of<nn::small>(), translate_small},
#endif
#if defined(ATTN_MODEL_BASE)
      {"base", widths_of<nn::base>(), translate_base},
#endif
#if defined(ATTN_MODEL_BIG)
      {"big", widths_of<nn::big>(), translate_big},
#endif
  };
  return models;
}

}  // namespace attn::translator
