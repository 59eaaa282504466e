// What attn-train tells the user while it works: a progress line, a metrics log in JSON
// lines, and training curves drawn by gnuplot.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace attn::trainer {

/// "1:02:03" or "4:05".
std::string format_duration(double seconds);

/// One training step's numbers, as logged and printed.
struct step_report {
  long step = 0;
  double loss = 0;        // label-smoothed cross-entropy per target token (what is minimised)
  double perplexity = 0;  // exp(negative log-likelihood per target token)
  double learning_rate = 0;
  double gradient_norm = 0;
  double target_tokens = 0;
  double tokens_per_second = 0;
  double elapsed_seconds = 0;
  double peak_device_mib = 0;  // --device cuda: the most device memory in use so far; 0 on the CPU
  double loss_scale = 0;       // --precision fp16: the dynamic loss scale after this step; 0: none
  long overflows = 0;          // --precision fp16: steps skipped for overflowing gradients so far
};

/// OUT/metrics.jsonl: one JSON object a line, {"kind": "train" | "valid" | "skipped", "step": …}.
class metrics_log {
 public:
  /// Opens for appending. A resumed run first drops the lines of steps after `resumed_step`:
  /// those came from work the checkpoint does not hold, and will be written again.
  metrics_log(const std::filesystem::path& path, long resumed_step);
  void train(const step_report& r);
  void valid(long step, double loss, double perplexity, double tokens);
  /// A skipped step; `loss_scale` (when positive) is the scale after it (an fp16 overflow's).
  void skipped(long step, const std::string& reason, double loss_scale = 0);

 private:
  std::ofstream out_;
};

/// The live progress line: rewritten in place on a terminal, one line every `log_every`
/// steps otherwise (logs, CI).
class progress {
 public:
  progress(long max_steps, double max_minutes, long log_every, long first_step);
  void train(const step_report& r);
  void valid(long step, double loss, double perplexity);
  void message(const std::string& text);  // a line of its own, e.g. "saved …"
  double elapsed() const;

 private:
  std::string eta(long step) const;
  void end_line();

  long max_steps_;
  double max_seconds_;
  long log_every_;
  long first_step_;
  bool terminal_;
  bool open_line_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Draws OUT/training.png from OUT/metrics.jsonl with gnuplot: loss and validation loss, and
/// the learning rate, against steps. Returns false, having said why, if it could not.
bool plot(const std::filesystem::path& metrics, const std::filesystem::path& png);

}  // namespace attn::trainer
