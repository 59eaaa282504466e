// The widths attn-translate is compiled for: the presets attn-train trains. Each is a
// translation unit of its own (model_*.cpp), so that they compile in parallel.
#include <attn/nn/config.hpp>

#include "job.hpp"

namespace attn::translator {

#if defined(ATTN_MODEL_TINY)
int translate_tiny(job&);
#if defined(ATTN_EXAMPLES_CUDA)
int translate_tiny_cuda(job&);
#endif
#endif
#if defined(ATTN_MODEL_SMALL)
int translate_small(job&);
#if defined(ATTN_EXAMPLES_CUDA)
int translate_small_cuda(job&);
#endif
#endif
#if defined(ATTN_MODEL_BASE)
int translate_base(job&);
#if defined(ATTN_EXAMPLES_CUDA)
int translate_base_cuda(job&);
#endif
#endif
#if defined(ATTN_MODEL_BIG)
int translate_big(job&);
#if defined(ATTN_EXAMPLES_CUDA)
int translate_big_cuda(job&);
#endif
#endif

#if defined(ATTN_EXAMPLES_CUDA)
#define ATTN_CUDA_OR_NULL(f) f
#else
#define ATTN_CUDA_OR_NULL(f) nullptr
#endif

std::span<const compiled_model> compiled_models() {
  static const compiled_model models[] = {
#if defined(ATTN_MODEL_TINY)
      {"tiny", widths_of<nn::tiny>(), translate_tiny, ATTN_CUDA_OR_NULL(translate_tiny_cuda)},
#endif
#if defined(ATTN_MODEL_SMALL)
      {"small", widths_of<nn::small>(), translate_small, ATTN_CUDA_OR_NULL(translate_small_cuda)},
#endif
#if defined(ATTN_MODEL_BASE)
      {"base", widths_of<nn::base>(), translate_base, ATTN_CUDA_OR_NULL(translate_base_cuda)},
#endif
#if defined(ATTN_MODEL_BIG)
      {"big", widths_of<nn::big>(), translate_big, ATTN_CUDA_OR_NULL(translate_big_cuda)},
#endif
  };
  return models;
}

}  // namespace attn::translator
