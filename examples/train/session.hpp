// What attn-train has prepared before a model exists: options, processes, vocabulary, data.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <attn/nn/config.hpp>
#include <attn/text/subword.hpp>
#include <attn/train/batching.hpp>
#include <attn/train/checkpoint.hpp>
#include <attn/train/communicator.hpp>

#include "../common/model_widths.hpp"
#include "options.hpp"

namespace attn::trainer {

/// Exit statuses beside 0 (done), 1 (error) and 2 (bad command line).
inline constexpr int exit_bad_steps = 3;

using examples::model_widths;
using examples::widths_of;

struct session {
  session(options o, train::communicator* c, text::subword_model v, std::string name, nn::hyperparameters h)
      : opts(std::move(o)), comm(c), vocabulary(std::move(v)), model_name(std::move(name)), hyper(h) {}

  options opts;
  train::communicator* comm = nullptr;
  text::subword_model vocabulary;
  std::string model_name;  // the compiled widths' name: "tiny", "table3.a_16", ...
  nn::hyperparameters hyper;
  std::vector<train::example> train_examples, valid_examples;
  std::vector<std::vector<std::uint32_t>> train_batches, valid_batches;

  bool leader() const { return comm->rank() == 0; }
  /// What a checkpoint must match to be loaded into this run: the model, and the batch plan.
  train::model_description description(const model_widths& widths) const;
  std::string batch_plan_digest() const;
};

/// Runs training for the model compiled with configuration C on Device, computing in
/// Activation over float parameters; returns the exit status.
template <class C, class Device, class Activation>
int run(session& s);

/// A training function: run<C, Device, Activation> for one compiled combination.
using train_function = int (*)(session&);

/// The widths attn-train is compiled for, each with its training functions by activation type
/// (float, bfloat16, float16; null where not compiled: meson option example_precisions).
struct compiled_model {
  const char* name;
  model_widths widths;
  std::array<train_function, 3> train{};       // on the CPU
  std::array<train_function, 3> train_cuda{};  // in builds with the CUDA backend
};
std::span<const compiled_model> compiled_models();

/// Which of compiled_model's functions computes in the activation type of `p`.
inline std::size_t activation_index(precision p) {
  return p == precision::bf16 ? 1 : p == precision::fp16 ? 2 : 0;
}

/// N, P_drop and positions of a preset ("tiny", "small", "base", "big").
nn::hyperparameters preset_hyperparameters(const std::string& preset);

}  // namespace attn::trainer
