// attn-train's command line (CLI11).
#include "options.hpp"

#include "../common/checks.hpp"
#include "../common/variant_names.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

namespace attn::trainer {

const char* to_string(precision p) {
  switch (p) {
    case precision::fp32:
      return "fp32";
    case precision::tf32:
      return "tf32";
    case precision::bf16:
      return "bf16";
    case precision::fp16:
      return "fp16";
  }
  return "?";
}

options parse(int argc, char** argv) {
  options o;
  std::string precision_name;
  CLI::App app{
      "attn-train: trains a Transformer translation model (Vaswani et al. 2017) on parallel text.\n"
      "The defaults are the paper's recipe for the base model on GPUs; on a CPU pick a smaller\n"
      "--config and --batch-tokens, e.g. --config tiny --batch-tokens 2000 --warmup 1000.",
      "attn-train"};
  app.get_formatter()->column_width(34);
  // A flag given twice takes its last value, so that overrides can be appended to a command.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  auto* data = "Data";
  app.add_option("--src", o.source, "training source text, one sentence a line")->required()->group(data);
  app.add_option("--tgt", o.target, "training target text, line i translates line i of --src")->required()->group(data);
  app.add_option("--valid-src", o.valid_source, "validation source text")->group(data);
  app.add_option("--valid-tgt", o.valid_target, "validation target text")->group(data);
  app.add_option("--vocab", o.vocabulary, "SentencePiece model to use instead of training one")
      ->check(CLI::ExistingFile)
      ->group(data);
  app.add_option("--vocab-size", o.vocabulary_size, "size of the shared BPE vocabulary trained on --src and --tgt")
      ->capture_default_str()
      ->check(CLI::Range(8, 1 << 20))
      ->group(data);
  app.add_option("--max-length", o.max_length, "pairs with more subwords on either side are skipped")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group(data);

  auto* model = "Model (presets and the hyperparameters of Table 3)";
  app.add_option("--config", o.preset, "preset: tiny, small, base or big")
      ->capture_default_str()
      ->check(CLI::IsMember({"tiny", "small", "base", "big"}))
      ->group(model);
  app.add_option("--layers", o.layers, "N, layers in each stack")->check(CLI::Range(1, 64))->group(model);
  // 0 stands for the preset's width inside (options.hpp); on the command line a width is at least 1.
  const auto width = CLI::Range(1, 1 << 20);
  app.add_option("--d-model", o.d_model, "d_model (compiled-in widths only; see --help's end)")
      ->check(width)
      ->group(model);
  app.add_option("--d-ff", o.d_ff, "d_ff, the inner width of the feed-forward layers")->check(width)->group(model);
  app.add_option("--heads", o.heads, "h, attention heads")->check(width)->group(model);
  app.add_option("--d-k", o.d_k, "d_k, query and key width of a head")->check(width)->group(model);
  app.add_option("--d-v", o.d_v, "d_v, value width of a head")->check(width)->group(model);
  app.add_option("--dropout", o.dropout, "P_drop on residuals and embeddings (preset's by default)")
      ->check(examples::finite_number(0.0, false, 0.99))
      ->group(model);
  app.add_option("--attention-dropout", o.attention_dropout,
                 "dropout on the attention weights (not in the paper; tensor2tensor's attention_dropout)")
      ->capture_default_str()
      ->check(examples::finite_number(0.0, false, 0.99))
      ->group(model);
  app.add_option("--label-smoothing", o.label_smoothing, "epsilon_ls")
      ->capture_default_str()
      ->check(examples::finite_number(0.0, false, 0.99))
      ->group(model);
  app.add_option("--positions", o.positions, "sinusoidal, learned (Table 3, row E) or none (for alibi)")
      ->check(CLI::IsMember({"sinusoidal", "learned", "none"}))
      ->group(model);
  app.add_option("--attention", o.attention,
                 "attention variant NAME[:ARG]: " + std::string(examples::variant_help) +
                     ". Every compiled preset has them all; multi-query and grouped-query attention are in the "
                     "library (docs/variants.md) but not compiled into this program")
      ->capture_default_str()
      ->check([](const std::string& spec) { return examples::unknown_variant(spec); })
      ->group(model);

  app.add_option("--attention-path", o.attention_path,
                 "fused: the device's tiled kernel (docs/fused-attention.md; refused for a variant it cannot "
                 "compute), unfused: products and a softmax, automatic: fused where it pays on the device (the "
                 "CPU: from 256 keys; a GPU: from 512 keys in bf16 and fp16)")
      ->capture_default_str()
      ->check(CLI::IsMember({"automatic", "fused", "unfused"}))
      ->group(model);
  app.add_flag("--deterministic", o.deterministic,
               "on a GPU in bf16 or fp16, where attention takes the fused kernel (--attention-path fused, or automatic "
               "from 512 keys), the same bits every run: its backward sums dQ in a kernel of its own instead of with "
               "atomics (slower; docs/fused-attention.md). "
               "Everything else, and the CPU, is deterministic anyway")
      ->group(model);

  auto* optimisation = "Optimisation";
  app.add_option("--batch-tokens", o.batch_tokens, "padded tokens a side in a batch (paper: ~25000, for GPUs)")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 30))
      ->group(optimisation);
  app.add_option("--accum", o.accumulate, "batches whose gradients are summed into one step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16))
      ->group(optimisation);
  app.add_option("--warmup", o.warmup, "warmup_steps of equation (3)")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 40))
      ->group(optimisation);
  app.add_option("--lr-scale", o.learning_rate_scale, "factor on the learning rate of equation (3)")
      ->capture_default_str()
      ->check(examples::finite_number(0.0, true))
      ->group(optimisation);
  app.add_option("--clip-norm", o.clip_norm, "clip the gradients' global norm to this (0: off)")
      ->capture_default_str()
      ->check(examples::finite_number(0.0))
      ->group(optimisation);
  app.add_option("--max-bad-steps", o.max_bad_steps, "stop after this many non-finite steps in a row")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group(optimisation);
  app.add_option("--bucket-mib", o.bucket_mib,
                 "several processes: gradients are summed over them in buckets of this many MiB, each as soon as "
                 "the backward pass has finished its gradients")
      ->capture_default_str()
      ->check(examples::finite_number(0.001, false, 1e6))
      ->group(optimisation);
  app.add_option("--precision", precision_name,
                 "fp32; tf32 (fp32, GPU products on tensor cores in TF32); bf16 or fp16 (16-bit activations and "
                 "product inputs, float master weights, Adam moments, softmax, LayerNorm and loss statistics; fp16 "
                 "with dynamic loss scaling). Default: bf16 with --device cuda, fp32 on the CPU (where 16 bits are "
                 "emulated, slower than fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))
      ->group(optimisation);
  app.add_option("--loss-scale", o.loss_scale,
                 "fp16: the initial loss scale (rounded to a power of two); halved after a step whose gradients "
                 "overflow, which is skipped, doubled after --loss-scale-window finite steps")
      ->capture_default_str()
      ->check(examples::finite_number(0x1p-24, false, 0x1p64))
      ->group(optimisation);
  app.add_option("--loss-scale-window", o.loss_scale_window, "fp16: finite steps in a row before the loss scale doubles")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 40))
      ->group(optimisation);

  auto* run = "Run";
  app.add_option("--out", o.out, "directory for checkpoints, vocabulary, metrics and plots")
      ->capture_default_str()
      ->group(run);
  app.add_option("--max-steps", o.max_steps, "stop after this many steps")
      ->capture_default_str()
      ->check(CLI::Range(0L, 1L << 40))
      ->group(run);
  app.add_option("--max-minutes", o.max_minutes, "stop, with a checkpoint, after this wall-clock time (0: none)")
      ->capture_default_str()
      ->check(examples::finite_number(0.0))
      ->group(run);
  app.add_option("--seed", o.seed, "seeds initialisation, data order and dropout")
      ->capture_default_str()
      ->check(examples::unsigned_64())
      ->group(run);
  examples::device_flags device;
  examples::add_device_flags(app, device, run);
  app.add_option("--gpus", o.gpus,
                 "train on N GPUs of this machine (from --device cuda:K on), one process each, which attn-train "
                 "starts and supervises: gradients summed by NCCL, Ctrl-C reaches all, one that fails stops all. "
                 "Several machines: mpirun -np N attn-train --device cuda (docs/training.md)")
      ->check(CLI::Range(1, 1024))
      ->group(run);
  app.add_option("--threads", o.threads, "threads per process (0: OpenMP's default)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024))
      ->group(run);
  app.add_option("--valid-every", o.valid_every, "steps between validations")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 40))
      ->group(run);
  app.add_option("--save-every", o.save_every, "steps between checkpoints")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 40))
      ->group(run);
  app.add_option("--log-every", o.log_every, "steps between progress lines when not on a terminal")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 40))
      ->group(run);
  app.add_option("--keep", o.keep, "checkpoints kept on disk, newest first")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20))
      ->group(run);
  app.add_flag("--resume", o.resume, "continue from the newest checkpoint in --out")->group(run);
  app.add_flag("--plot", o.plot, "draw the training curves into OUT/training.png (gnuplot)")->group(run);
  app.add_option("--debug-nan-steps", o.debug_nan_steps, "poison the gradients of these step attempts (tests recovery)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Debugging");
  std::string profile_steps;
  app.add_option("--profile-steps", profile_steps,
                 "FROM:TO: step attempts FROM to TO inside a GPU profiler's capture range (cudaProfilerStart and "
                 "Stop: ncu --profile-from-start off, nsys --capture-range=cudaProfilerApi; scripts/gpu.sh's "
                 "profile benchmark); needs --device cuda")
      ->group("Debugging");

  app.footer(
      "Compiled widths (d_model, d_ff, h, d_k, d_v): tiny (128, 512, 4, 32, 32), small (256, 1024, 4, 64, 64),\n"
      "base (512, 2048, 8, 64, 64), big (1024, 4096, 16, 64, 64); builds with -Dtrainer_table3=true add the\n"
      "widths of Table 3, rows A-C.\n"
      "--device cuda trains on a GPU with the same numbers as on the CPU (to rounding) with --precision fp32;\n"
      "checkpoints do not depend on the device or the precision (weights and moments are fp32): a run resumes\n"
      "on either, in any precision, and translates with attn-translate on the CPU.\n"
      "Exit status: 0 done, 1 error, 2 bad command line (or --device cuda without a CUDA build or GPU),\n"
      "3 stopped after --max-bad-steps non-finite steps. Stopped by SIGINT or SIGTERM, it saves a checkpoint\n"
      "and ends by that signal (a shell's status 130 or 143); a process of an MPI or --gpus job exits with\n"
      "130 or 143 instead.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    std::exit(2);
  }
  if (o.valid_source.empty() != o.valid_target.empty()) {
    std::cerr << "attn-train: --valid-src and --valid-tgt go together\n";
    std::exit(2);
  }
  if (const std::string refused = examples::apply_device_flags(device, o.device, o.tf32); !refused.empty()) {
    std::cerr << "attn-train: " << refused << "\n";
    std::exit(2);
  }
  // Additive attention scores with a network of its own, which the tiled kernel cannot run.
  if (o.attention_path == "fused" && o.attention.substr(0, o.attention.find(':')) == "additive") {
    std::cerr << "attn-train: --attention-path fused: additive attention scores with a network of its own, which the "
                 "fused kernel cannot compute; use --attention-path unfused or automatic\n";
    std::exit(2);
  }
  if (!profile_steps.empty()) {
    const auto colon = profile_steps.find(':');
    char* end = nullptr;
    const long first = std::strtol(profile_steps.c_str(), &end, 10);
    const bool first_read = colon != std::string::npos && end == profile_steps.c_str() + colon && colon > 0;
    const char* second = profile_steps.c_str() + (colon == std::string::npos ? 0 : colon + 1);
    const long last = first_read ? std::strtol(second, &end, 10) : 0;
    if (!first_read || end == second || *end != '\0' || first < 1 || last < first) {
      std::cerr << "attn-train: --profile-steps expects FROM:TO, two step numbers with 1 <= FROM <= TO (as in 20:22), "
                   "got '"
                << profile_steps << "'\n";
      std::exit(2);
    }
    if (!o.device.cuda) {
      std::cerr << "attn-train: --profile-steps marks steps for a GPU profiler: it needs --device cuda\n";
      std::exit(2);
    }
    o.profile_first = first;
    o.profile_last = last;
  }
  if (o.gpus > 0 && !o.device.cuda) {
    std::cerr << "attn-train: --gpus " << o.gpus << " starts a process per GPU: it needs --device cuda\n";
    std::exit(2);
  }
  // --tf32 on is --precision tf32; the two must not disagree.
  if (o.tf32 && !precision_name.empty() && precision_name != "tf32") {
    std::cerr << "attn-train: --tf32 on asks for --precision tf32, not --precision " << precision_name << "\n";
    std::exit(2);
  }
  if (precision_name.empty()) precision_name = o.tf32 ? "tf32" : o.device.cuda ? "bf16" : "fp32";
  o.precision = precision_name == "tf32"   ? precision::tf32
                : precision_name == "bf16" ? precision::bf16
                : precision_name == "fp16" ? precision::fp16
                                           : precision::fp32;
  if (o.precision == precision::tf32 && !o.device.cuda) {
    std::cerr << "attn-train: --precision tf32 applies to --device cuda only (the CPU has no TF32 products)\n";
    std::exit(2);
  }
  o.tf32 = o.precision == precision::tf32;
  return o;
}

}  // namespace attn::trainer
