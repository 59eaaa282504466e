// The training loop of attn-train for one compiled configuration: the paper's recipe (§5)
// with gradient accumulation, data-parallel processes, checkpoints and validation.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <attn/cpu.hpp>
#include <attn/grad.hpp>
#include <attn/nn.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/checkpoint.hpp>
#include <attn/train/clip.hpp>
#include <attn/train/loss.hpp>

#include "checkpoints.hpp"
#include "report.hpp"
#include "session.hpp"

namespace attn::trainer {

/// The signal that asked the run to stop (SIGINT, SIGTERM), or 0.
std::atomic<int>& stop_signal();

/// The batch order of each epoch, computed when first asked for.
class data_order {
 public:
  data_order(std::size_t batches, std::uint64_t seed) : batches_(batches), seed_(seed) {}

  /// The batch at `position`, and the position after it.
  std::uint32_t at(const train::data_position& position) {
    if (order_.empty() || epoch_ != position.epoch) {
      order_ = train::epoch_order(batches_, seed_, position.epoch);
      epoch_ = position.epoch;
    }
    return order_[position.index];
  }
  train::data_position next(train::data_position position) const {
    if (++position.index == batches_) position = {position.epoch + 1, 0};
    return position;
  }

 private:
  std::size_t batches_;
  std::uint64_t seed_;
  std::vector<std::uint32_t> order_;  // of epoch_
  std::uint64_t epoch_ = 0;
};

/// Dropout numbers for the g-th batch of the run: a stream of its own, so that masks depend
/// on the batch, not on which process or step it falls in, nor on a resume.
inline random_stream dropout_stream(std::uint64_t seed, std::uint64_t batch) {
  return random_stream(seed ^ 0x5eed'd50b'0d0a'7e11ULL, batch << 40);
}

template <class C>
int run(session& s) {
  using T = float;
  const options& o = s.opts;
  train::communicator& comm = *s.comm;
  const int ranks = comm.size(), rank = comm.rank();
  const auto pad = static_cast<nn::token>(text::subword_model::pad_id);
  const auto bos = static_cast<nn::token>(text::subword_model::bos_id);
  const auto eos = static_cast<nn::token>(text::subword_model::eos_id);

  nn::transformer<T, C> model(s.vocabulary.size(), o.seed, pad, s.hyper);
  auto parameters = model.parameters();
  train::adam<T> optimizer(parameters);
  train::gradient_buckets<T> buckets(parameters);
  const model_widths widths{int(C::d_model::extent), int(C::d_ff::extent), int(C::heads::extent),
                            int(C::d_k::extent), int(C::d_v::extent)};
  const auto description = s.description(widths);

  train::training_state state;
  state.seed = o.seed;
  checkpoint_directory checkpoints(o.out, o.keep);
  if (o.resume) {
    const auto newest = checkpoints.newest();
    if (!newest) throw std::runtime_error("--resume: no checkpoint-*.safetensors in '" + o.out.string() + "'");
    state = train::load_checkpoint(*newest, parameters, optimizer, description);
    if (state.seed != o.seed)
      throw std::runtime_error(newest->string() + " was trained with --seed " + std::to_string(state.seed) +
                               ", this run has --seed " + std::to_string(o.seed) +
                               ": the data order would differ; pass the same seed");
    if (s.leader()) std::fprintf(stderr, "resumed from %s at step %ld\n", newest->c_str(), state.step);
  }

  if (s.leader()) {
    std::fprintf(stderr, "model %s: %s, N %d, P_drop %.2f, %s positions, eps_ls %.2f: %lld parameters\n",
                 s.model_name.c_str(), widths.to_string().c_str(), s.hyper.layers, s.hyper.dropout,
                 s.hyper.positions == nn::positional::learned ? "learned" : "sinusoidal", o.label_smoothing,
                 static_cast<long long>(parameters.count()));
    std::fprintf(stderr, "training on %zu pairs in %zu batches of <= %ld tokens a side, %d process(es) x %d batch(es) a step\n",
                 s.train_examples.size(), s.train_batches.size(), o.batch_tokens, ranks, o.accumulate);
  }

  std::optional<metrics_log> log;
  if (s.leader()) log.emplace(o.out / "metrics.jsonl", o.resume ? state.step : -1);
  progress bar(o.max_steps, o.max_minutes, o.log_every, state.step);
  data_order order(s.train_batches.size(), o.seed);

  auto save = [&](const char* why) {
    if (!s.leader()) return true;
    try {
      const auto path = checkpoints.save(state.step, [&](const std::filesystem::path& p) {
        train::save_checkpoint(p, parameters, optimizer, state, description);
      });
      bar.message("saved " + path.string() + " (" + why + ")");
      return true;
    } catch (const std::exception& e) {
      bar.message(std::string("attn-train: could not save a checkpoint: ") + e.what());
      if (const auto kept = checkpoints.newest()) bar.message("the previous checkpoint " + kept->string() + " is kept");
      return false;
    }
  };

  auto validate = [&]() {
    if (s.valid_batches.empty()) return;
    double sums[3] = {0, 0, 0};  // smoothed, nll, tokens
    for (std::size_t i = std::size_t(rank); i < s.valid_batches.size(); i += std::size_t(ranks)) {
      const auto b = train::make_batch(s.valid_examples, s.valid_batches[i], pad, bos, eos);
      const auto logits = model(nn::inference(), b.source, b.target_in);
      const auto l = train::cross_entropy<T>(nullptr, logits, b.target_out, o.label_smoothing, pad);
      sums[0] += l.smoothed;
      sums[1] += l.nll;
      sums[2] += double(l.tokens);
    }
    comm.all_reduce_sum(std::span<double>(sums, 3));
    const double loss = sums[0] / sums[2], perplexity = std::exp(sums[1] / sums[2]);
    if (s.leader()) {
      bar.valid(state.step, loss, perplexity);
      log->valid(state.step, loss, perplexity, sums[2]);
    }
  };

  const bool time_limited = o.max_minutes > 0;
  const long batches_per_step = long(ranks) * o.accumulate;
  long last_saved = o.resume ? state.step : -1;
  long attempt = state.step;  // steps tried, skipped ones included: what --debug-nan-steps counts
  int exit_status = 0;
  auto window_start = bar.elapsed();
  double window_tokens = 0;

  while (state.step < o.max_steps) {
    // Every process learns the step's token count and whether any process must stop.
    std::vector<train::batch> mine;
    double control[3] = {0, 0, 0};  // target tokens, stop signal, time up
    train::data_position position = state.data;
    for (long k = 0; k < batches_per_step; ++k) {
      if (k / o.accumulate == rank) {
        mine.push_back(train::make_batch(s.train_examples, s.train_batches[order.at(position)], pad, bos, eos));
        control[0] += double(mine.back().target_tokens);
      }
      position = order.next(position);
    }
    control[1] = stop_signal().load() != 0 ? 1 : 0;
    control[2] = time_limited && bar.elapsed() > o.max_minutes * 60 ? 1 : 0;
    comm.all_reduce_sum(std::span<double>(control, 3));
    if (control[1] > 0 || control[2] > 0) break;
    const double step_tokens = control[0];

    // Forward and backward over this process's batches; each batch's loss weighs by its
    // share of the step's tokens, so the sum is the mean over every token of the step.
    double sums[2] = {0, 0};  // smoothed, nll
    for (std::size_t j = 0; j < mine.size(); ++j) {
      auto stream = dropout_stream(o.seed, state.batches_seen + std::uint64_t(rank) * std::uint64_t(o.accumulate) + j);
      grad::tape tape;
      const nn::context ctx{&tape, &stream};
      const auto logits = model(ctx, mine[j].source, mine[j].target_in);
      const auto l = train::cross_entropy<T>(&tape, logits, mine[j].target_out, o.label_smoothing, pad);
      grad::backward(tape, grad::scale(&tape, l.loss, T(double(l.tokens) / step_tokens)));
      sums[0] += l.smoothed;
      sums[1] += l.nll;
    }
    buckets.all_reduce(comm);
    comm.all_reduce_sum(std::span<double>(sums, 2));
    state.data = position;
    state.batches_seen += std::uint64_t(batches_per_step);

    const long step = state.step + 1;
    ++attempt;
    for (long poisoned : o.debug_nan_steps)
      if (poisoned == attempt && !parameters.refs().empty()) parameters.refs().front().grad[0] = std::nanf("");
    const double loss = sums[0] / step_tokens, perplexity = std::exp(sums[1] / step_tokens);
    const double norm = train::clip_gradient_norm(parameters, o.clip_norm);
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      parameters.zero_grad();
      ++state.bad_steps_in_row;
      const std::string reason = !std::isfinite(loss) ? "non-finite loss" : "non-finite gradient norm";
      if (s.leader()) {
        bar.message("attn-train: warning: step " + std::to_string(step) + " skipped: " + reason + " (" +
                    std::to_string(state.bad_steps_in_row) + " in a row)");
        log->skipped(step, reason);
      }
      if (state.bad_steps_in_row >= o.max_bad_steps) {
        if (s.leader()) bar.message("attn-train: stopping: " + std::to_string(state.bad_steps_in_row) +
                                    " steps in a row were not finite (--max-bad-steps)");
        exit_status = exit_bad_steps;
        break;
      }
      continue;
    }
    state.bad_steps_in_row = 0;
    const double rate = o.learning_rate_scale * train::noam_rate(C::d_model::extent, step, o.warmup);
    optimizer.step(rate);
    parameters.zero_grad();
    state.step = step;

    window_tokens += step_tokens;
    const double now = bar.elapsed();
    step_report r{step, loss, perplexity, rate, norm, step_tokens, window_tokens / std::max(now - window_start, 1e-9), now};
    if (now - window_start > 10) {  // tokens/s over the last ten seconds or so
      window_start = now;
      window_tokens = 0;
    }
    if (s.leader()) {
      log->train(r);
      bar.train(r);
    }
    if (step % o.valid_every == 0) validate();
    if (step % o.save_every == 0 && save("every --save-every steps")) last_saved = step;
  }

  const int signal = stop_signal().load();
  if (state.step != last_saved) {
    const char* why = signal != 0 ? "stopped by a signal" : exit_status != 0 ? "stopped by bad steps" : "end of training";
    if (!save(why) && exit_status == 0) exit_status = 1;
  }
  if (exit_status == 0 && signal == 0 && state.step % o.valid_every != 0) validate();
  if (s.leader() && o.plot && plot(o.out / "metrics.jsonl", o.out / "training.png"))
    bar.message("plotted " + (o.out / "training.png").string());
  if (signal != 0) return 128 + signal;
  return exit_status;
}

}  // namespace attn::trainer
