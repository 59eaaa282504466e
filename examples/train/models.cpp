// The widths attn-train is compiled for. Each is a translation unit of its own (model_*.cpp),
// so that they compile in parallel; a new one is a file of three lines and a line here.
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <attn/nn/config.hpp>

#include "session.hpp"

namespace attn::trainer {

#if defined(ATTN_MODEL_TINY)
int train_tiny(session&);
#if defined(ATTN_EXAMPLES_CUDA)
int train_tiny_cuda(session&);
#endif
#endif
#if defined(ATTN_MODEL_SMALL)
int train_small(session&);
#if defined(ATTN_EXAMPLES_CUDA)
int train_small_cuda(session&);
#endif
#endif
#if defined(ATTN_MODEL_BASE)
int train_base(session&);
#if defined(ATTN_EXAMPLES_CUDA)
int train_base_cuda(session&);
#endif
#endif
#if defined(ATTN_MODEL_BIG)
int train_big(session&);
#if defined(ATTN_EXAMPLES_CUDA)
int train_big_cuda(session&);
#endif
#endif
#if defined(ATTN_TRAINER_TABLE3)
int train_table3_a_1(session&);
int train_table3_a_4(session&);
int train_table3_a_16(session&);
int train_table3_a_32(session&);
int train_table3_b_16(session&);
int train_table3_b_32(session&);
int train_table3_c_d256(session&);
int train_table3_c_d1024(session&);
int train_table3_c_ff1024(session&);
int train_table3_c_ff4096(session&);
#endif

#if defined(ATTN_EXAMPLES_CUDA)
#define ATTN_CUDA_OR_NULL(f) f
#else
#define ATTN_CUDA_OR_NULL(f) nullptr
#endif

std::span<const compiled_model> compiled_models() {
  static const compiled_model models[] = {
#if defined(ATTN_MODEL_TINY)
      {"tiny", widths_of<nn::tiny>(), train_tiny, ATTN_CUDA_OR_NULL(train_tiny_cuda)},
#endif
#if defined(ATTN_MODEL_SMALL)
      {"small", widths_of<nn::small>(), train_small, ATTN_CUDA_OR_NULL(train_small_cuda)},
#endif
#if defined(ATTN_MODEL_BASE)
      {"base", widths_of<nn::base>(), train_base, ATTN_CUDA_OR_NULL(train_base_cuda)},
#endif
#if defined(ATTN_MODEL_BIG)
      {"big", widths_of<nn::big>(), train_big, ATTN_CUDA_OR_NULL(train_big_cuda)},
#endif
#if defined(ATTN_TRAINER_TABLE3)
      {"table3.a_1", widths_of<nn::table3::a_1>(), train_table3_a_1},
      {"table3.a_4", widths_of<nn::table3::a_4>(), train_table3_a_4},
      {"table3.a_16", widths_of<nn::table3::a_16>(), train_table3_a_16},
      {"table3.a_32", widths_of<nn::table3::a_32>(), train_table3_a_32},
      {"table3.b_16", widths_of<nn::table3::b_16>(), train_table3_b_16},
      {"table3.b_32", widths_of<nn::table3::b_32>(), train_table3_b_32},
      {"table3.c_d256", widths_of<nn::table3::c_d256>(), train_table3_c_d256},
      {"table3.c_d1024", widths_of<nn::table3::c_d1024>(), train_table3_c_d1024},
      {"table3.c_ff1024", widths_of<nn::table3::c_ff1024>(), train_table3_c_ff1024},
      {"table3.c_ff4096", widths_of<nn::table3::c_ff4096>(), train_table3_c_ff4096},
#endif
  };
  return models;
}

nn::hyperparameters preset_hyperparameters(const std::string& preset) {
  if (preset == "tiny") return nn::defaults<nn::tiny>();
  if (preset == "small") return nn::defaults<nn::small>();
  if (preset == "base") return nn::defaults<nn::base>();
  if (preset == "big") return nn::defaults<nn::big>();
  throw std::invalid_argument("unknown preset '" + preset + "'");
}

train::model_description session::description(const model_widths& widths) const {
  return {
      {"model.d_model", std::to_string(widths.d_model)},
      {"model.d_ff", std::to_string(widths.d_ff)},
      {"model.heads", std::to_string(widths.heads)},
      {"model.d_k", std::to_string(widths.d_k)},
      {"model.d_v", std::to_string(widths.d_v)},
      {"model.layers", std::to_string(hyper.layers)},
      {"model.positions", std::string(nn::to_string(hyper.positions))},
      {"model.attention", hyper.attention},
      {"model.vocab_size", std::to_string(vocabulary.size())},
      {"model.norm", "post"},
      {"model.tied_embeddings", "true"},
      {"data.batch_plan", batch_plan_digest()},
  };
}

std::string session::batch_plan_digest() const {
  // A checkpoint's data position indexes this plan: other data, --batch-tokens, --max-length or
  // vocabulary give another plan, where that position would mean nothing.
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the batches' sizes and indices
  auto mix = [&](std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte, value >>= 8) hash = (hash ^ (value & 0xff)) * 0x100000001b3ULL;
  };
  for (const auto& batch : train_batches) {
    mix(batch.size());
    for (std::uint32_t index : batch) mix(index);
  }
  char text[64];
  std::snprintf(text, sizeof text, "%zu batches, %016llx", train_batches.size(), static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace attn::trainer
