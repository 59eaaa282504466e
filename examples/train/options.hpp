// attn-train's settings: the paper's recipe (§5) as defaults, every one a flag.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../common/device.hpp"

namespace attn::trainer {

/// What the passes compute in (--precision): fp32 everywhere; fp32 with the GPU's products in
/// TF32; or bfloat16 / float16 activations and product inputs over float master weights and
/// Adam moments, every kernel accumulating in float (float16 with dynamic loss scaling).
enum class precision { fp32, tf32, bf16, fp16 };

/// "fp32", "tf32", "bf16", "fp16".
const char* to_string(precision p);

struct options {
  // Data (one sentence a line, line i of --tgt translates line i of --src).
  std::filesystem::path source, target, valid_source, valid_target;
  std::filesystem::path vocabulary;  // an existing SentencePiece model; trained when empty
  int vocabulary_size = 8000;
  int max_length = 256;  // subwords a side; longer pairs are skipped and counted

  // Model: a preset and Table 3's overrides. Widths must be compiled in (models.cpp); N,
  // P_drop, ε_ls and the kind of positions are free.
  std::string preset = "base";
  int d_model = 0, d_ff = 0, heads = 0, d_k = 0, d_v = 0, layers = 0;  // 0: the preset's
  double dropout = -1;                                                // < 0: the preset's
  double attention_dropout = 0;                                       // on attention weights (not the paper's)
  double label_smoothing = 0.1;
  std::string positions;  // "sinusoidal", "learned" or "none"; empty: the preset's
  std::string attention = "scaled";  // the attention variant, NAME[:ARG] (examples/common/variants.hpp)
  std::string attention_path = "automatic";  // fused, unfused or automatic (nn::attention_path)
  bool deterministic = false;  // fused attention's backward without atomics (nn::context::deterministic)

  // Optimisation (§5.2, §5.3).
  long batch_tokens = 25000;  // padded tokens a side per batch; the paper's value, meant for GPUs
  int accumulate = 1;         // batches summed into one step
  long warmup = 4000;
  double learning_rate_scale = 1.0;  // multiplies equation (3)
  double clip_norm = 0;              // 0: no clipping
  int max_bad_steps = 5;             // non-finite steps in a row before stopping
  double bucket_mib = 25;            // gradients summed over processes in buckets of this size (PyTorch DDP's)

  // The run.
  std::filesystem::path out = "run";
  long max_steps = 100000;  // the base model's 100k steps (§5.2)
  double max_minutes = 0;   // 0: no wall-clock budget
  std::uint64_t seed = 1;
  int threads = 0;  // 0: OpenMP's default
  examples::device_choice device;  // --device: cpu, cuda[:N]
  int gpus = 0;                    // --gpus N: N processes on GPUs device.index …, started and supervised here
  bool tf32 = false;               // fp32 GPU products in TF32 (--precision tf32, or --tf32 on)
  trainer::precision precision = trainer::precision::fp32;  // --precision; bf16 on a GPU, fp32 on the CPU by default
  double loss_scale = 65536;        // float16: the initial dynamic loss scale
  long loss_scale_window = 2000;    // float16: finite steps in a row before the scale doubles
  long valid_every = 1000, save_every = 1000, log_every = 100;
  int keep = 5;  // checkpoints kept (attn-average averages the last few)
  bool resume = false;
  bool plot = false;
  std::vector<long> debug_nan_steps;  // poison the gradients of these step attempts (tests recovery)
  long profile_first = 0, profile_last = 0;  // --profile-steps FROM:TO (step attempts); 0: none
};

/// Parses the command line; prints help or errors and exits on them (status 0 or 2).
options parse(int argc, char** argv);

}  // namespace attn::trainer
