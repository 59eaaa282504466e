// What attn-translate has prepared before a model exists: options, vocabulary, input, weights.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <attn/nn/config.hpp>
#include <attn/text/subword.hpp>
#include <attn/train/average.hpp>

#include "../common/device.hpp"
#include "../common/model_widths.hpp"
#include "input.hpp"

namespace attn::translator {

using examples::model_widths;
using examples::widths_of;

struct options {
  std::filesystem::path checkpoint, run, vocabulary, input, output, references, attention_dir, scores;
  std::filesystem::path targets;  // --score: sentences to score instead of translating
  int average = 1;
  int beam = 4;
  bool greedy = false;
  double alpha = 0.6;
  int max_length_offset = 50;
  int max_input_length = 1024;  // subwords an input line is cut to (0: none), CTranslate2's default
  int nbest = 1;
  int batch_size = 32;
  int window = 100;  // batches sorted by length together and then written (0: the whole input)
  int threads = 0;
  examples::device_choice device;  // --device: cpu, cuda[:N]
  bool tf32 = false;               // --tf32: fp32 GPU products in TF32
  int samples = 0;
  std::vector<int> attention_lines{1};
  bool quiet = false;
  bool with_scores = false;  // every output line "i ||| text ||| score ||| log-prob ||| per token"
  bool pieces = false;       // subword pieces instead of text, out and (for --score) in
  bool resume = false;       // go on from --output's FILE.partial, which a stopped run kept
};

struct job {
  job(options o, text::subword_model v) : opts(std::move(o)), vocabulary(std::move(v)) {}

  options opts;
  text::subword_model vocabulary;
  input_lines input;                    // one sentence a line, read as decoding goes
  std::vector<std::string> references;  // --bleu's reference translations, or none
  std::vector<std::string> targets;     // --score's sentences, or none
  train::averaged_weights weights;
  nn::hyperparameters hyper;
  std::string model_name;
};

/// Translates job.input with the model compiled for configuration C on Device; returns the
/// exit status.
template <class C, class Device>
int translate(job& j);

struct compiled_model {
  const char* name;
  model_widths widths;
  int (*translate)(job&);
  int (*translate_cuda)(job&) = nullptr;  // in builds with the CUDA backend
};
std::span<const compiled_model> compiled_models();

}  // namespace attn::translator
