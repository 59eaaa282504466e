// The training loop of attn-train for one compiled configuration: the paper's recipe (§5)
// with gradient accumulation, data-parallel processes, checkpoints and validation.
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <concepts>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <attn/core.hpp>
#include <attn/grad.hpp>
#include <attn/nn.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/checkpoint.hpp>
#include <attn/train/clip.hpp>
#include <attn/train/loss.hpp>
#include <attn/train/loss_scale.hpp>

#include "../common/device.hpp"
#include "../common/stop_signals.hpp"
#include "../common/variants.hpp"
#include "checkpoints.hpp"
#include "report.hpp"
#include "session.hpp"

namespace attn::trainer {

using examples::stop_signal;

/// The batch order of each epoch, computed when first asked for.
class data_order {
 public:
  data_order(std::size_t batches, std::uint64_t seed) : batches_(batches), seed_(seed) {}

  /// The batch at `position`, and the position after it.
  std::uint32_t at(const train::data_position& position) {
    if (position.index >= batches_)  // a checkpoint's position always fits its batch plan
      throw std::out_of_range("batch " + std::to_string(position.index) + " of " + std::to_string(batches_));
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

/// A loss scale as written in messages: 65536, 0.5, 1099511627776 (powers of two, exactly).
inline std::string scale_text(double scale) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", scale);
  return text;
}

/// The training loop on Device (a backend header, attn/cpu.hpp or attn/cuda/cuda.cuh, is
/// included before this one), the passes computing in A (float, bfloat16 or float16) over float
/// parameters, Adam moments and gradients. Batches are made on the host and copied to the device.
template <class C, class Device, class A>
int run(session& s) {
  using T = float;  // the parameters', their gradients', the optimizer's and the loss's type
  const options& o = s.opts;
  train::communicator& comm = *s.comm;
  const int ranks = comm.size(), rank = comm.rank();
  const auto pad = static_cast<nn::token>(text::subword_model::pad_id);
  const auto bos = static_cast<nn::token>(text::subword_model::bos_id);
  const auto eos = static_cast<nn::token>(text::subword_model::eos_id);

  nn::transformer<nn::precision<A, T>, examples::with_variants<C>, Device> model(s.vocabulary.size(), o.seed, pad,
                                                                              s.hyper);
  auto parameters = model.parameters();
  train::adam<T, Device> optimizer(parameters);
  train::gradient_buckets<T, Device> buckets(parameters, std::size_t(o.bucket_mib * double(1 << 20)));
  const model_widths widths = widths_of<C>();
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
    if (s.leader() && state.step >= o.max_steps)
      std::fprintf(stderr, "attn-train: the run is at step %ld, --max-steps %ld: nothing to train (raise --max-steps)\n",
                   state.step, o.max_steps);
  }
  // float16's range ends at 65504 and its smallest numbers are 2⁻²⁴: its gradients need a loss
  // scale (train/loss_scale.hpp); bfloat16 has float's range and needs none.
  std::optional<train::loss_scaler> scaler;
  if constexpr (std::same_as<A, float16>) {
    scaler.emplace(train::loss_scale_options{o.loss_scale, o.loss_scale_window});
    scaler->restore(state.loss_scale);  // a checkpoint of a float16 run goes on at its scale
  }

  if (s.leader()) {
    std::fprintf(stderr,
                 "model %s: %s, N %d, P_drop %.2f, %s positions, %s attention (weights' dropout %.2f), eps_ls %.2f: "
                 "%lld parameters\n",
                 s.model_name.c_str(), widths.to_string().c_str(), s.hyper.layers, s.hyper.dropout,
                 std::string(nn::to_string(s.hyper.positions)).c_str(), s.hyper.attention.c_str(),
                 s.hyper.attention_dropout, o.label_smoothing,
                 static_cast<long long>(parameters.count()));
    if (o.precision == precision::bf16 || o.precision == precision::fp16)
      std::fprintf(stderr,
                   "precision %s: %s activations and product inputs, accumulated in fp32; fp32 weights, gradients "
                   "and Adam moments%s\n",
                   to_string(o.precision), o.precision == precision::bf16 ? "bfloat16" : "float16",
                   scaler ? (", dynamic loss scale from " + scale_text(scaler->scale())).c_str() : "");
    else
      std::fprintf(stderr, "precision %s\n", to_string(o.precision));
    std::fprintf(stderr, "training on %zu pairs in %zu batches of <= %ld tokens a side, %d process(es) x %d batch(es) a step\n",
                 s.train_examples.size(), s.train_batches.size(), o.batch_tokens, ranks, o.accumulate);
  }

  // --attention-path: the fused kernel, products and a softmax, or the device's choice (nn/context.hpp).
  const nn::attention_path attention_path = o.attention_path == "fused"     ? nn::attention_path::fused
                                            : o.attention_path == "unfused" ? nn::attention_path::unfused
                                                                            : nn::attention_path::automatic;

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
    std::array<double, 3> sums{};  // summed over processes
    auto& [smoothed, nll, tokens] = sums;
    for (std::size_t i = std::size_t(rank); i < s.valid_batches.size(); i += std::size_t(ranks)) {
      const auto b = train::make_batch(s.valid_examples, s.valid_batches[i], pad, bos, eos);
      nn::context ctx = nn::inference();
      ctx.path = attention_path;
      const auto logits = model(ctx, to_device<Device>(b.source), to_device<Device>(b.target_in));
      const auto l = train::cross_entropy(nullptr, logits, to_device<Device>(b.target_out), o.label_smoothing, pad);
      smoothed += l.smoothed;
      nll += l.nll;
      tokens += double(l.tokens);
    }
    comm.all_reduce_sum(sums);
    const double loss = smoothed / tokens, perplexity = std::exp(nll / tokens);
    if (s.leader()) {
      bar.valid(state.step, loss, perplexity);
      log->valid(state.step, loss, perplexity, tokens);
    }
  };

  // Asked of the device only when training on one: on the CPU the CUDA runtime stays untouched.
  auto peak_device_mib = [] {
    if constexpr (std::same_as<Device, cpu>) return 0.0;
    else return double(examples::peak_device_memory()) / double(1 << 20);
  };
  const long batches_per_step = long(ranks) * o.accumulate;
  long last_saved = o.resume ? state.step : -1;
  long failed_save = -1;  // the last step whose checkpoint could not be saved
  long attempt = state.step;  // steps tried, skipped ones included: what --debug-nan-steps counts
  enum class ending { done, signal, time, bad_steps } why = ending::done;
  auto window_start = bar.elapsed();
  double window_tokens = 0;

  // --profile-steps: the capture range opens before attempt FROM and closes after attempt TO.
  bool capturing = false;
  const auto capture = [&](bool on) {
    if constexpr (!std::same_as<Device, cpu>) examples::profiler_capture(on);  // refused on the CPU (options.cpp)
    capturing = on;
  };

  if (o.profile_first > 0 && o.profile_first <= attempt && s.leader())
    bar.message("attn-train: warning: --profile-steps " + std::to_string(o.profile_first) + ":" +
                std::to_string(o.profile_last) + " starts at or before step " + std::to_string(attempt) +
                ", where this run resumes: nothing will be captured");
  while (state.step < o.max_steps) {
    if (capturing && attempt >= o.profile_last) capture(false);
    if (!capturing && attempt + 1 == o.profile_first) capture(true);
    std::vector<train::batch> mine;  // this process's share of the step's batches
    // What every process must agree on before a step: the step's tokens, and whether to stop.
    std::array<double, 3> control{};
    auto& [target_tokens, signalled, out_of_time] = control;
    train::data_position position = state.data;
    for (long k = 0; k < batches_per_step; ++k) {
      if (k / o.accumulate == rank) {
        mine.push_back(train::make_batch(s.train_examples, s.train_batches[order.at(position)], pad, bos, eos));
        target_tokens += double(mine.back().target_tokens);
      }
      position = order.next(position);
    }
    signalled = stop_signal().load() != 0 ? 1 : 0;
    out_of_time = o.max_minutes > 0 && bar.elapsed() > o.max_minutes * 60 ? 1 : 0;
    comm.all_reduce_sum(control);  // a signal or the clock on any process stops them all at one step
    if (signalled > 0 || out_of_time > 0) {
      why = signalled > 0 ? ending::signal : ending::time;
      break;
    }

    // Forward and backward over this process's batches; each batch's loss weighs by its
    // share of the step's tokens, so the sum is the mean over every token of the step.
    std::array<double, 2> sums{};  // summed over batches and processes, for the log
    auto& [smoothed, nll] = sums;
    // The gradients are summed over processes while the last batch's backward pass runs: a
    // bucket as soon as the tape reports its parameters complete (none on earlier batches,
    // whose gradients only accumulate).
    buckets.begin(comm);
    for (std::size_t j = 0; j < mine.size(); ++j) {
      auto stream = dropout_stream(o.seed, state.batches_seen + std::uint64_t(rank) * std::uint64_t(o.accumulate) + j);
      grad::tape tape;
      const nn::context ctx{&tape, &stream, nullptr, attention_path, o.deterministic};
      // The logits go out of scope with the loss: the tape keeps their gradient only until the
      // output projection's step has read it, and their value not at all.
      const auto l = [&] {
        const auto logits = model(ctx, to_device<Device>(mine[j].source), to_device<Device>(mine[j].target_in));
        return train::cross_entropy(&tape, logits, to_device<Device>(mine[j].target_out), o.label_smoothing, pad);
      }();
      const double seed = double(l.tokens) / target_tokens * (scaler ? scaler->scale() : 1.0);
      const auto scaled = grad::scale(&tape, l.loss, T(seed));
      if (j + 1 == mine.size()) grad::backward(tape, scaled, [&](const void* parameter) { buckets.complete(parameter); });
      else grad::backward(tape, scaled);
      smoothed += l.smoothed;
      nll += l.nll;
    }
    buckets.finish();
    comm.all_reduce_sum(sums);
    if (ranks > 1 && state.batches_seen == 0 && s.leader()) {  // the first step of a run over processes
      char line[200];
      std::snprintf(line, sizeof line,
                    "gradients summed over %d processes in %zu bucket(s) of <= %g MiB, %zu of them started as the "
                    "backward pass completed them",
                    ranks, buckets.bucket_count(), o.bucket_mib, buckets.started_early());
      bar.message(line);
    }
    state.data = position;
    state.batches_seen += std::uint64_t(batches_per_step);

    const long step = state.step + 1;
    ++attempt;
    for (long poisoned : o.debug_nan_steps)
      if (poisoned == attempt && !parameters.refs().empty())
        primitives<Device>::fill(parameters.refs().front().grad, 1, std::nanf(""));
    const double loss = smoothed / target_tokens, perplexity = std::exp(nll / target_tokens);
    const double norm =
        scaler ? scaler->unscale(parameters, o.clip_norm) : train::clip_gradient_norm(parameters, o.clip_norm);
    if (scaler && std::isfinite(loss) && !std::isfinite(norm) && !scaler->at_smallest()) {
      // float16's gradients overflowed: the scale's doing, not the model's. Skipped, not counted
      // as a bad step; the scale halves (the same on every process: the gradients were reduced).
      parameters.zero_grad();
      const double was = scaler->scale();
      scaler->update(false);
      state.loss_scale = scaler->state();
      if (s.leader()) {
        const std::string reason =
            "float16 gradients overflowed at loss scale " + scale_text(was) + "; now " + scale_text(scaler->scale());
        bar.message("attn-train: step " + std::to_string(step) + " skipped: " + reason);
        log->skipped(step, reason, scaler->scale());
      }
      continue;
    }
    if (!std::isfinite(loss) || !std::isfinite(norm)) {  // the same on every process: both were reduced
      parameters.zero_grad();
      ++state.bad_steps_in_row;
      const std::string reason = !std::isfinite(loss) ? "non-finite loss" : "non-finite gradient norm";
      if (s.leader()) {
        bar.message("attn-train: warning: step " + std::to_string(step) + " skipped: " + reason + " (" +
                    std::to_string(state.bad_steps_in_row) + " in a row)");
        log->skipped(step, reason);
      }
      if (state.bad_steps_in_row >= o.max_bad_steps) {
        if (s.leader())
          bar.message("attn-train: stopping: " + std::to_string(state.bad_steps_in_row) +
                      " step(s) in a row were not finite (--max-bad-steps)");
        why = ending::bad_steps;
        break;
      }
      continue;
    }
    state.bad_steps_in_row = 0;
    if (scaler) {
      scaler->update(true);
      state.loss_scale = scaler->state();
    }
    const double rate = o.learning_rate_scale * train::noam_rate(C::d_model::extent, step, o.warmup);
    optimizer.step(rate);
    parameters.zero_grad();
    state.step = step;

    window_tokens += target_tokens;
    const double now = bar.elapsed();
    const step_report r{step,
                        loss,
                        perplexity,
                        rate,
                        norm,
                        target_tokens,
                        window_tokens / std::max(now - window_start, 1e-9),
                        now,
                        peak_device_mib(),
                        scaler ? scaler->scale() : 0.0,
                        scaler ? scaler->state().overflows : 0};
    if (now - window_start > 10) {  // tokens/s over the last ten seconds or so
      window_start = now;
      window_tokens = 0;
    }
    if (s.leader()) {
      log->train(r);
      bar.train(r);
    }
    if (step % o.valid_every == 0) validate();
    if (step % o.save_every == 0) {
      if (save("every --save-every steps")) last_saved = step;
      else failed_save = step;
    }
  }

  if (capturing) capture(false);

  // The skipped batches are behind the saved data position, so a resumed run goes on after them.
  int status = why == ending::bad_steps ? exit_bad_steps : 0;
  if (state.step != last_saved || why == ending::bad_steps) {
    const char* reason = why == ending::signal      ? "stopped by a signal"
                         : why == ending::time      ? "the --max-minutes budget is spent"
                         : why == ending::bad_steps ? "stopped by non-finite steps"
                                                    : "end of training";
    // The last step's own save failed: the end tries once more (a disk may have been freed since),
    // and says so, rather than print the same error twice unexplained.
    if (state.step == failed_save && s.leader())
      bar.message("attn-train: trying once more to save step " + std::to_string(state.step) + "'s checkpoint");
    if (!save(reason) && status == 0) status = 1;
  }
  if (why != ending::signal && why != ending::bad_steps && state.step % o.valid_every != 0) validate();
  if (s.leader() && o.plot && plot(o.out / "metrics.jsonl", o.out / "training.png"))
    bar.message("plotted " + (o.out / "training.png").string());
  if (why == ending::signal) {
    const int signal = stop_signal().load();
    return 128 + (signal != 0 ? signal : SIGTERM);  // SIGTERM: another process was signalled
  }
  return status;
}

}  // namespace attn::trainer
