// attn-demo: multi-head self-attention (paper §3.2, eq. (1)) written with attn's expressions,
// run on random inputs; prints the shapes, a correctness check and the time per call.
#include <attn/attn.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace {

// Dimensions: batch and lengths are chosen at run time, model sizes at compile time.
using batch = attn::dim<"batch">;
using len = attn::dim<"len">;      // query positions
using len_k = attn::dim<"len_k">;  // key positions: the same length under a second name
using d_model = attn::dim<"d_model", 512>;
using heads = attn::dim<"heads", 8>;
using d_k = attn::dim<"d_k", 64>;

struct options {
  long batch = 8;
  long length = 128;
  long repeat = 20;
};

void print_help() {
  std::puts(
      "usage: attn-demo [--batch N] [--len N] [--repeat N]\n"
      "\n"
      "Runs softmax(Q K^T / sqrt(d_k)) V over 8 heads of a [batch, len, 512] random input,\n"
      "checks that every attention row sums to 1 and that the output matches a plain loop\n"
      "on one head, and prints the time per call.\n"
      "\n"
      "  --batch N   sentences per batch (default 8)\n"
      "  --len N     positions per sentence (default 128)\n"
      "  --repeat N  timed calls (default 20)\n"
      "  --help      this text");
}

long parse_positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0) {
    std::fprintf(stderr, "attn-demo: %s expects a positive integer, got '%s'\n", flag, text);
    std::exit(2);
  }
  return value;
}

options parse(int argc, char** argv) {
  options opts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_help();
      std::exit(0);
    }
    if (i + 1 >= argc || (arg != "--batch" && arg != "--len" && arg != "--repeat")) {
      std::fprintf(stderr, "attn-demo: unknown or incomplete option '%s' (see --help)\n", argv[i]);
      std::exit(2);
    }
    const long value = parse_positive(argv[i], argv[i + 1]);
    ++i;
    if (arg == "--batch") opts.batch = value;
    if (arg == "--len") opts.length = value;
    if (arg == "--repeat") opts.repeat = value;
  }
  return opts;
}

/// §3.2.1, eq. (1), per head: softmax(Q Kᵀ / √d_k) V, with x as queries, keys and values.
template <class X>
void self_attention(const X& x, attn::tensor<float, attn::shape<batch, heads, len, len_k>>& weights,
                    attn::tensor<float, attn::shape<batch, len, d_model>>& out) {
  auto q = attn::permute<batch, heads, len, d_k>(attn::split<d_model, heads, d_k>(x));  // [b, h, len, d_k]
  auto k = attn::rename<len, len_k>(q);                                                 // [b, h, len_k, d_k]
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_k::extent));
  weights = attn::contract<d_k>(q, k) * scale;  // [b, h, len, len_k]
  auto shifted = attn::exp(weights - attn::broadcast_like(attn::max<len_k>(weights), weights));
  weights = shifted / attn::broadcast_like(attn::sum<len_k>(shifted), weights);
  auto heads_out = attn::contract<len_k>(weights, k);  // [b, h, len, d_k]
  out = attn::merge<heads, d_k, d_model>(attn::permute<batch, len, heads, d_k>(heads_out));
}

}  // namespace

int main(int argc, char** argv) {
  const options opts = parse(argc, argv);
  attn::tensor<float, attn::shape<batch, len, d_model>> x(opts.batch, opts.length), out(opts.batch, opts.length);
  attn::tensor<float, attn::shape<batch, heads, len, len_k>> weights(opts.batch, opts.length, opts.length);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (attn::index_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);

  std::printf("attn %s: self-attention, x %s, %ld heads of d_k %ld, %d threads\n", attn::version(),
              x.extents().to_string().c_str(), static_cast<long>(heads::extent),
              static_cast<long>(d_k::extent), attn::cpu_backend::max_threads());
  self_attention(x, weights, out);

  // Every attention row is a distribution.
  auto row_sums = attn::eval(attn::sum<len_k>(weights));
  double worst = 0;
  for (attn::index_t i = 0; i < row_sums.size(); ++i) worst = std::fmax(worst, std::fabs(row_sums.data()[i] - 1.0));
  std::printf("weights %s: max |row sum - 1| = %.2e\n", weights.extents().to_string().c_str(), worst);

  // The last sentence, head 0, position 0, against a plain loop.
  const long b = opts.batch - 1, n = opts.length;
  double check = 0;
  {
    std::vector<double> score(static_cast<std::size_t>(n));
    double max_score = -1e300, total = 0;
    for (long j = 0; j < n; ++j) {
      double s = 0;
      for (long c = 0; c < d_k::extent; ++c) s += double(x(b, 0L, c)) * x(b, j, c);
      score[std::size_t(j)] = s / std::sqrt(double(d_k::extent));
      max_score = std::fmax(max_score, score[std::size_t(j)]);
    }
    for (auto& s : score) total += (s = std::exp(s - max_score));
    for (long c = 0; c < d_k::extent; ++c) {
      double o = 0;
      for (long j = 0; j < n; ++j) o += score[std::size_t(j)] / total * x(b, j, c);
      check = std::fmax(check, std::fabs(o - out(b, 0L, c)));
    }
  }
  std::printf("out %s: max |attn - loop| on one head = %.2e\n", out.extents().to_string().c_str(), check);

  const auto start = std::chrono::steady_clock::now();
  for (long r = 0; r < opts.repeat; ++r) self_attention(x, weights, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / double(opts.repeat);
  const double flops = 4.0 * double(opts.batch) * double(heads::extent) * double(n) * double(n) * double(d_k::extent);
  std::printf("%.3f ms per call, %.1f GFLOP/s in the two batched products (%ld calls)\n", seconds * 1e3,
              flops / seconds * 1e-9, opts.repeat);
  const bool ok = worst < 1e-4 && check < 1e-3;
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
