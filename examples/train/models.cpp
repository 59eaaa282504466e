// The widths and precisions attn-train is compiled for. Each preset in each precision on each
// device is a translation unit of its own (model.cpp or model_cuda.cu, compiled once for each by
// examples/meson.build), so that they compile in parallel; Table 3's rows are files of three lines.
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <attn/nn/config.hpp>

#include "session.hpp"

namespace attn::trainer {

// Every function meson may compile for a preset (examples/meson.build: model.cpp and
// model_cuda.cu, once for each precision); only the compiled ones are named in the table.
#define ATTN_DECLARE_PRESET(preset)                                                                \
  int train_##preset##_fp32(session&);                                                             \
  int train_##preset##_bf16(session&);                                                             \
  int train_##preset##_fp16(session&);                                                             \
  int train_##preset##_fp32_cuda(session&);                                                        \
  int train_##preset##_bf16_cuda(session&);                                                        \
  int train_##preset##_fp16_cuda(session&);
ATTN_DECLARE_PRESET(tiny)
ATTN_DECLARE_PRESET(small)
ATTN_DECLARE_PRESET(base)
ATTN_DECLARE_PRESET(big)
#undef ATTN_DECLARE_PRESET
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
#if defined(ATTN_PRECISION_BF16)
#define ATTN_BF16_OR_NULL(f) f
#else
#define ATTN_BF16_OR_NULL(f) nullptr
#endif
#if defined(ATTN_PRECISION_FP16)
#define ATTN_FP16_OR_NULL(f) f
#else
#define ATTN_FP16_OR_NULL(f) nullptr
#endif
#if defined(ATTN_GPU_PRECISION_BF16)
#define ATTN_GPU_BF16_OR_NULL(f) ATTN_CUDA_OR_NULL(f)
#else
#define ATTN_GPU_BF16_OR_NULL(f) nullptr
#endif
#if defined(ATTN_GPU_PRECISION_FP16)
#define ATTN_GPU_FP16_OR_NULL(f) ATTN_CUDA_OR_NULL(f)
#else
#define ATTN_GPU_FP16_OR_NULL(f) nullptr
#endif
#define ATTN_PRESET_ENTRY(preset)                                                                            \
  {#preset, widths_of<nn::preset>(),                                                                         \
   {train_##preset##_fp32, ATTN_BF16_OR_NULL(train_##preset##_bf16), ATTN_FP16_OR_NULL(train_##preset##_fp16)}, \
   {ATTN_CUDA_OR_NULL(train_##preset##_fp32_cuda), ATTN_GPU_BF16_OR_NULL(train_##preset##_bf16_cuda),           \
    ATTN_GPU_FP16_OR_NULL(train_##preset##_fp16_cuda)}}

std::span<const compiled_model> compiled_models() {
  static const compiled_model models[] = {
#if defined(ATTN_MODEL_TINY)
      ATTN_PRESET_ENTRY(tiny),
#endif
#if defined(ATTN_MODEL_SMALL)
      ATTN_PRESET_ENTRY(small),
#endif
#if defined(ATTN_MODEL_BASE)
      ATTN_PRESET_ENTRY(base),
#endif
#if defined(ATTN_MODEL_BIG)
      ATTN_PRESET_ENTRY(big),
#endif
#if defined(ATTN_TRAINER_TABLE3)  // fp32 on the CPU only
      {"table3.a_1", widths_of<nn::table3::a_1>(), {train_table3_a_1}},
      {"table3.a_4", widths_of<nn::table3::a_4>(), {train_table3_a_4}},
      {"table3.a_16", widths_of<nn::table3::a_16>(), {train_table3_a_16}},
      {"table3.a_32", widths_of<nn::table3::a_32>(), {train_table3_a_32}},
      {"table3.b_16", widths_of<nn::table3::b_16>(), {train_table3_b_16}},
      {"table3.b_32", widths_of<nn::table3::b_32>(), {train_table3_b_32}},
      {"table3.c_d256", widths_of<nn::table3::c_d256>(), {train_table3_c_d256}},
      {"table3.c_d1024", widths_of<nn::table3::c_d1024>(), {train_table3_c_d1024}},
      {"table3.c_ff1024", widths_of<nn::table3::c_ff1024>(), {train_table3_c_ff1024}},
      {"table3.c_ff4096", widths_of<nn::table3::c_ff4096>(), {train_table3_c_ff4096}},
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
