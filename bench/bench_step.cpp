// bench-step: time of one training step (forward, label-smoothed loss, backward, Adam) of a
// Transformer configuration on random token batches; one JSON line per configuration. With
// --config gemm: the rate of attn's float matrix product at a size of base's training step.
// bench/step_vs_torch.py runs it beside PyTorch's nn.Transformer in the same configuration.
#include <attn/attn.hpp>
#include <attn/nn.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/loss.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace attn;

struct options {
  std::string config = "tiny";
  long batch = 32, src_len = 32, tgt_len = 32, vocab = 8000, steps = 10, warmup = 2;
};

[[noreturn]] void usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: bench-step [--config tiny|small|base|gemm] [--batch N] [--src-len N] [--tgt-len N]\n"
               "                  [--vocab N] [--steps N] [--warmup N]\n"
               "\n"
               "Times training steps (forward, label-smoothed cross-entropy, backward, Adam) of the\n"
               "configuration on random token batches and prints one JSON line:\n"
               "  {\"config\": ..., \"ms_per_step\": median, \"tokens_per_s\": target tokens / s, ...,\n"
               "   \"forward_held_mib\": tensors a forward pass leaves for the backward pass,\n"
               "   \"step_peak_mib\": the step's peak over the memory held before it}\n"
               "--config gemm times attn's float product [1024, 512] x [512, 2048] (base's feed-forward at\n"
               "1024 tokens) instead: {\"gflops\": median rate, \"through\": \"oneDNN\" or \"Eigen/BLAS\"}.\n"
               "Threads: OMP_NUM_THREADS. Defaults: tiny, batch 32, lengths 32, vocabulary 8000,\n"
               "10 timed steps after 2 untimed.\n");
  std::exit(status);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage(0);
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench-step: %s needs a value (see --help)\n", argv[i]);
      std::exit(2);
    }
    const char* value = argv[++i];
    if (arg == "--config") {
      o.config = value;
      continue;
    }
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (end == value || *end != '\0' || n <= 0) {
      std::fprintf(stderr, "bench-step: %s expects a positive integer, got '%s'\n", arg.c_str(), value);
      std::exit(2);
    }
    if (arg == "--batch") o.batch = n;
    else if (arg == "--src-len") o.src_len = n;
    else if (arg == "--tgt-len") o.tgt_len = n;
    else if (arg == "--vocab") o.vocab = n;
    else if (arg == "--steps") o.steps = n;
    else if (arg == "--warmup") o.warmup = n;
    else {
      std::fprintf(stderr, "bench-step: unknown option '%s' (see --help)\n", arg.c_str());
      std::exit(2);
    }
  }
  return o;
}

template <class L>
tensor<nn::token, shape<nn::batch, L>> random_tokens(long batch, long length, long vocab, random_stream& stream) {
  tensor<nn::token, shape<nn::batch, L>> ids(batch, length);
  const auto start = stream.take(std::uint64_t(ids.size()));
  // Ids 1 … vocab − 1: no padding, so every position counts.
  for (index_t i = 0; i < ids.size(); ++i)
    ids.data()[i] = nn::token(1 + long(stream.uniform(start + std::uint64_t(i)) * double(vocab - 1)));
  return ids;
}

template <class C>
void run(const options& o) {
  nn::transformer<float, C> model(o.vocab, 1);
  auto parameters = model.parameters();
  train::adam<float> adam(parameters);
  random_stream data(2), dropout(3);
  const auto source = random_tokens<nn::src>(o.batch, o.src_len, o.vocab, data);
  const auto input = random_tokens<nn::tgt>(o.batch, o.tgt_len, o.vocab, data);
  const auto output = random_tokens<nn::tgt>(o.batch, o.tgt_len, o.vocab, data);
  grad::tape tape;
  std::vector<double> times;
  double loss = 0;
  std::size_t held_after_forward = 0, step_peak = 0;
  for (long step = 0; step < o.warmup + o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    parameters.zero_grad();
    const std::size_t resting = memory<cpu>::used_bytes();
    memory<cpu>::reset_peak();
    // The logits in a scope of their own, as attn-train has them: the tape alone decides how
    // long their gradient lives.
    const auto result = [&] {
      const auto logits = model(nn::context{&tape, &dropout}, source, input);
      return train::cross_entropy(&tape, logits, output, C::label_smoothing, nn::token{0});
    }();
    held_after_forward = memory<cpu>::used_bytes() - resting;
    grad::backward(tape, result.loss);
    step_peak = memory<cpu>::peak_bytes() - resting;
    adam.step(1e-4);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step >= o.warmup) times.push_back(seconds);
    loss = result.loss.value().data()[0];
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf(
      "{\"impl\": \"attn\", \"config\": \"%s\", \"batch\": %ld, \"src_len\": %ld, \"tgt_len\": %ld, \"vocab\": %ld, "
      "\"threads\": %d, \"parameters\": %ld, \"ms_per_step\": %.3f, \"ms_min\": %.3f, \"tokens_per_s\": %.1f, "
      "\"last_loss\": %.4f, \"forward_held_mib\": %.1f, \"step_peak_mib\": %.1f}\n",
      o.config.c_str(), o.batch, o.src_len, o.tgt_len, o.vocab, cpu_backend::max_threads(), long(parameters.count()),
      median * 1e3, times.front() * 1e3, double(o.batch * o.tgt_len) / median, loss,
      double(held_after_forward) / (1 << 20), double(step_peak) / (1 << 20));
  std::fflush(stdout);
}

/// The machine's rate for the products a training step is made of, through the same path.
void gemm_rate(const options& o) {
  using m = dim<"m">;
  using k = dim<"k">;
  using n = dim<"n">;
  tensor<float, shape<m, k>> a(1024, 512);
  tensor<float, shape<k, n>> b(512, 2048);
  tensor<float, shape<m, n>> c(1024, 2048);
  for (index_t i = 0; i < a.size(); ++i) a.data()[i] = float(i % 7) * 0.25f;
  for (index_t i = 0; i < b.size(); ++i) b.data()[i] = float(i % 5) * 0.5f;
  std::vector<double> rates;
  for (long round = 0; round < o.warmup + o.steps; ++round) {
    const auto start = std::chrono::steady_clock::now();
    constexpr int products = 20;
    for (int p = 0; p < products; ++p) c = contract<k>(a, b);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round >= o.warmup) rates.push_back(products * 2.0 * 1024 * 512 * 2048 / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("{\"impl\": \"attn\", \"config\": \"gemm\", \"m\": 1024, \"k\": 512, \"n\": 2048, \"threads\": %d, "
              "\"gflops\": %.1f, \"gflops_max\": %.1f, \"through\": \"%s\"}\n",
              cpu_backend::max_threads(), rates[rates.size() / 2], rates.back(),
              cpu_backend::dnnl_gemm_enabled() ? "oneDNN" : "Eigen/BLAS");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  if (o.config == "gemm") gemm_rate(o);
  else if (o.config == "tiny") run<nn::tiny>(o);
  else if (o.config == "small") run<nn::small>(o);
  else if (o.config == "base") run<nn::base>(o);
  else {
    std::fprintf(stderr, "bench-step: unknown configuration '%s' (tiny, small, base or gemm)\n", o.config.c_str());
    return 2;
  }
}
