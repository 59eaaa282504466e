// Memory-bound kernels of a training step on the GPU, each timed alone with CUDA events (the
// median of --repeat runs after two warm-up runs, the GPU kept busy for half a second before
// the first), at a batch's sizes:
// - a bias's gradient, Σ dy over the rows of [rows, width] (grad::linear, 96 of them in a base
//   step): one thread a column, as every column ran until 2026-11-27
//   (reduce_kernels::columns_kernel), and now (attn::sum, cut into chunks by reduce.cuh);
// - LayerNorm's backward pass with its gain and bias sums, [rows, 512] and [rows, 1024] (30 in
//   a base or big step);
// - the embedding gradient (primitives::scatter_add_rows) of `rows` positions of a vocabulary
//   of 8000, where one id in 25 is the same (every sentence's end), width 512;
// - the generated elementwise kernel on a residual sum, c = a + b, a bias added along the rows,
//   c = a + broadcast(bias), and the heads' split, [rows, width] permuted to [rows / 25, width /
//   64, 25, 64]: rounds of elementwise_unroll elements a thread (ATTN_ELEMENTWISE_VECTORS=0), and
//   runs of 16 bytes a thread (elementwise_vectors.cuh);
// - the loss (primitives::cross_entropy, label smoothing 0.1) and its backward pass over
//   [rows, --classes] logits, the vocabulary of the paper's English-German runs by default;
// - attention's six products at sentences of 10 and 32 words (8 heads of 64), on attn's kernel
//   for small products and on cuBLAS (ATTN_SMALL_PRODUCTS's switch, contract.cuh).
// One JSON line a measurement, then a table: microseconds, and GB/s as the operand's bytes
// (the bias gradient's dy; LayerNorm's dy, x and dx; the embedding gradient's rows, though its
// time includes the sort; the elementwise kernel's operands and result, the bias left out; the
// loss's logits and float probabilities, its backward pass's probabilities and gradient; the
// products' two operands and result) over the time: a rate to compare, not always the bytes
// moved.
//   primitives_gpu [--rows 8000,25000] [--widths 512,2048] [--types bf16,fp32] [--repeat 20]
//                  [--kernels bias,layer_norm,embedding,elementwise,loss,products]
#include <attn/cuda/cuda.cuh>
#include <attn/cuda/reduce_kernels.cuh>

#include <cuda_runtime.h>

#include "gpu_bench.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace attn;
using gpu = attn::cuda;  // not plain `cuda`: CUDA's headers have a namespace of that name
using rows_dim = dim<"rows">;
using width_dim = dim<"width">;
using matrix = shape<rows_dim, width_dim>;
using attn_bench::split;

/// A [rows, width] matrix of normal random numbers on the device.
template <class T>
tensor<T, matrix, gpu> random_device(index_t rows, index_t width, unsigned seed) {
  return attn_bench::random_device<T, matrix>(rows, width, seed);
}

/// The kernels --kernels chooses among, in the order they run.
const std::vector<std::string> every_kernel{"bias", "layer_norm", "embedding", "elementwise", "loss", "products"};

struct options {
  std::vector<index_t> rows{8000, 25000};
  std::vector<index_t> widths{512, 2048};
  std::vector<std::string> types{"bf16", "fp32"};
  std::vector<std::string> kernels = every_kernel;
  index_t classes = 37000;
  int repeat = 20;
};

std::vector<index_t> numbers(const std::string& flag, const std::string& text) {
  std::vector<index_t> values;
  for (const auto& part : split(text)) {
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || value < 1)
      throw std::invalid_argument(flag + ": expected positive integers, got " + text);
    values.push_back(index_t(value));
  }
  return values;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::puts(
          "primitives_gpu: memory-bound kernels of a training step on the GPU, each timed alone\n"
          "  --rows N,N,...     positions of a batch (default 8000,25000)\n"
          "  --widths N,N,...   the bias gradients' and elementwise kernels' widths (default 512,2048)\n"
          "  --types T,T        bf16, fp32 (default both)\n"
          "  --kernels K,K,...  bias, layer_norm, embedding, elementwise, loss, products (default all)\n"
          "  --classes N        the loss's vocabulary (default 37000)\n"
          "  --repeat N         timed runs, after 2 warm-up runs (default 20)");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (--help)");
    const std::string value = argv[++i];
    if (flag == "--rows") o.rows = numbers(flag, value);
    else if (flag == "--widths") o.widths = numbers(flag, value);
    else if (flag == "--types") o.types = split(value);
    else if (flag == "--kernels") o.kernels = split(value);
    else if (flag == "--classes") o.classes = std::max<index_t>(2, numbers(flag, value).front());
    else if (flag == "--repeat") o.repeat = int(std::min<index_t>(numbers(flag, value).front(), 100000));
    else throw std::invalid_argument("unknown option " + flag + " (--help)");
  }
  for (const auto& k : o.kernels)
    if (std::ranges::find(every_kernel, k) == every_kernel.end())
      throw std::invalid_argument("--kernels: bias, layer_norm, embedding, elementwise, loss or products, not " + k);
  return o;
}

double median_us(int repeat, const std::function<void()>& run) { return 1000 * attn_bench::median_ms(repeat, run); }

struct measurement {
  std::string what, type;
  index_t rows, width;
  double us, bytes;
};
std::vector<measurement> measured;

void report(measurement m) {
  std::printf("{\"what\": \"%s\", \"type\": \"%s\", \"rows\": %lld, \"width\": %lld, \"us\": %.2f, "
              "\"gb_per_s\": %.1f}\n",
              m.what.c_str(), m.type.c_str(), static_cast<long long>(m.rows), static_cast<long long>(m.width), m.us,
              m.bytes / m.us / 1000.0);
  std::fflush(stdout);
  measured.push_back(std::move(m));
}

template <class T>
void column_sums(const options& o, const std::string& type) {
  for (const index_t rows : o.rows)
    for (const index_t width : o.widths) {
      const auto dy = random_device<T>(rows, width, 1);
      tensor<T, shape<width_dim>, gpu> db(width);
      const double bytes = double(rows * width) * sizeof(T);
      const int block = cuda_backend::reduce_kernels::block;
      const unsigned grid = cuda_backend::detail::grid_for(width, block);
      report({"bias gradient, a thread a column (until 2026-11-27)", type, rows, width, median_us(o.repeat, [&] {
                cuda_backend::reduce_kernels::columns_kernel<op::sum, T, T>
                    <<<grid, block, 0, cuda_backend::stream()>>>(dy.data(), db.data(), 1, rows, width);
                ATTN_CUDA_CHECK(cudaGetLastError());
              }), bytes});
      report({"bias gradient, chunks (attn::sum)", type, rows, width,
              median_us(o.repeat, [&] { db = sum<rows_dim>(dy); }), bytes});
    }
}

template <class T>
void layer_norm_backward(const options& o, const std::string& type) {
  using C = accumulate_t<T>;
  for (const index_t width : {index_t{512}, index_t{1024}})  // base's and big's d_model
    for (const index_t rows : o.rows) {
      const auto dy = random_device<T>(rows, width, 2);
      const auto x = random_device<T>(rows, width, 3);
      const auto gain = random_device<T>(1, width, 4);
      tensor<T, matrix, gpu> dx(rows, width);
      tensor<T, matrix, gpu> gain_grad(1, width), bias_grad(1, width);
      tensor<C, shape<rows_dim>, gpu> mean(rows), rstd(rows);
      primitives<gpu>::fill(mean.data(), rows, C(0));
      primitives<gpu>::fill(rstd.data(), rows, C(1));
      // dy, x and dx: the rate's bytes (the partials not counted).
      const double bytes = 3.0 * double(rows * width) * sizeof(T);
      report({"LayerNorm backward with gain and bias sums", type, rows, width, median_us(o.repeat, [&] {
                primitives<gpu>::layer_norm_rows_backward(dx.data(), false, gain_grad.data(), bias_grad.data(),
                                                          dy.data(), x.data(), mean.data(), rstd.data(), gain.data(),
                                                          rows, width);
              }), bytes});
    }
}

template <class T>
void embedding_gradient(const options& o, const std::string& type) {
  const index_t width = 512, vocabulary = 8000;
  for (const index_t rows : o.rows) {
    const auto rows_in = random_device<T>(rows, width, 5);
    tensor<T, matrix, gpu> table(vocabulary, width);
    primitives<gpu>::fill(table.data(), table.size(), T(0));
    std::vector<std::int32_t> host_ids(static_cast<std::size_t>(rows));
    std::mt19937 generator(6);
    std::uniform_int_distribution<std::int32_t> any(3, std::int32_t(vocabulary - 1));
    for (index_t i = 0; i < rows; ++i) host_ids[std::size_t(i)] = i % 25 == 24 ? 2 : any(generator);
    std::int32_t* ids = attn_bench::upload(host_ids);
    const double bytes = double(rows * width) * sizeof(T);
    report({"embedding gradient (one id in 25 the same)", type, rows, width, median_us(o.repeat, [&] {
              primitives<gpu>::scatter_add_rows(table.data(), width, rows_in.data(), ids, rows, accumulate_t<T>(1));
            }), bytes});
    memory<gpu>::deallocate(ids);
  }
}

/// Times `assign` with the elementwise kernel a run of 16 bytes a thread and an element a
/// thread (elementwise_vectors.cuh; rounds of elementwise_unroll elements).
template <class F>
void both_kernels(const options& o, const std::string& what, const std::string& type, index_t rows, index_t width,
                  double bytes, F&& assign) {
  for (const bool runs : {false, true}) {
    cuda_backend::elementwise_vectors() = runs;
    report({what + (runs ? ", runs of 16 bytes" : ", rounds of elements"), type, rows, width,
            median_us(o.repeat, assign), bytes});
  }
  cuda_backend::elementwise_vectors() = true;
}

template <class T>
void elementwise(const options& o, const std::string& type) {
  using sentences = dim<"sentences">;
  using length = dim<"length">;
  using heads = dim<"heads">;
  using depth = dim<"depth">;
  using by_heads = shape<sentences, heads, length, depth>;
  for (const index_t rows : o.rows)
    for (const index_t width : o.widths) {
      const auto a = random_device<T>(rows, width, 7);
      const auto b = random_device<T>(rows, width, 8);
      tensor<T, shape<width_dim>, gpu> bias(width);
      primitives<gpu>::fill(bias.data(), width, T(0.5f));
      tensor<T, matrix, gpu> c(rows, width);
      const double bytes = 3.0 * double(rows * width) * sizeof(T);
      const auto sum = a.view() + b.view();
      const auto biased = a.view() + broadcast_like(bias.view(), a.view());
      both_kernels(o, "a + b", type, rows, width, bytes, [&] { c = sum; });
      both_kernels(o, "a + bias", type, rows, width, 2.0 * bytes / 3.0, [&] { c = biased; });
      // The heads' split (grad::split_heads): [rows, width] as sentences of 25 positions, heads
      // of 64, to [sentences, heads, 25, 64].
      if (rows % 25 == 0 && width % 64 == 0) {
        using by_tokens = shape<sentences, length, heads, depth>;
        const tensor_view<const T, by_tokens, gpu> tokens(a.data(), extents<by_tokens>(rows / 25, 25, width / 64, 64));
        tensor<T, by_heads, gpu> split(rows / 25, width / 64, 25, 64);
        both_kernels(o, "split heads", type, rows, width, 2.0 * bytes / 3.0,
                     [&] { split = permute<sentences, heads, length, depth>(tokens); });
      }
    }
}

template <class T>
void loss(const options& o, const std::string& type) {
  using C = accumulate_t<T>;
  for (const index_t rows : o.rows) {
    const auto logits = random_device<T>(rows, o.classes, 10);
    tensor<C, matrix, gpu> probabilities(rows, o.classes);
    tensor<T, matrix, gpu> gradient(rows, o.classes);
    tensor<C, shape<rows_dim>, gpu> weight(rows);
    std::vector<std::int32_t> host_targets(static_cast<std::size_t>(rows));
    std::mt19937 generator(11);
    std::uniform_int_distribution<std::int32_t> any(1, std::int32_t(o.classes - 1));
    for (auto& target : host_targets) target = any(generator);
    std::int32_t* targets = attn_bench::upload(host_targets);
    const double elements = double(rows * o.classes);
    report({"loss forward (cross_entropy)", type, rows, o.classes, median_us(o.repeat, [&] {
              (void)primitives<gpu>::cross_entropy(logits.data(), targets, rows, o.classes, 0.1, std::int32_t(0),
                                                   probabilities.data(), weight.data());
            }), elements * double(sizeof(T) + sizeof(C))});
    report({"loss backward (cross_entropy_backward)", type, rows, o.classes, median_us(o.repeat, [&] {
              primitives<gpu>::cross_entropy_backward(gradient.data(), probabilities.data(), targets, weight.data(),
                                                      rows, o.classes, 0.1, C(1.0 / double(rows)));
            }), elements * double(sizeof(T) + sizeof(C))});
    memory<gpu>::deallocate(targets);
  }
}

/// Attention's six products at sentences of 10 and 32 words, [rows / words, 8 heads, words, 64]
/// an operand: attn's kernel for small products (small_products.cuh), then cuBLAS's batched GEMM.
template <class T>
void attention_products(const options& o, const std::string& type) {
  using batch = dim<"batch">;
  using heads = dim<"heads">;
  using len = dim<"len">;
  using src = dim<"src">;
  using dk = dim<"d_k">;
  using by_query = shape<batch, heads, len, dk>;
  using by_key = shape<batch, heads, src, dk>;
  using square = shape<batch, heads, len, src>;
  constexpr index_t H = 8, D = 64;
  for (const index_t rows : o.rows)
    for (const index_t words : {index_t{10}, index_t{32}}) {
      const index_t B = rows / words;
      const auto tall_operand = [&](unsigned seed) { return random_device<T>(B * H * words, D, seed); };
      const auto square_operand = [&](unsigned seed) { return random_device<T>(B * H * words, words, seed); };
      const auto q_store = tall_operand(11), k_store = tall_operand(12), v_store = tall_operand(13),
                 d_out_store = tall_operand(14), p_store = square_operand(15), ds_store = square_operand(16);
      const tensor_view<const T, by_query, gpu> q(q_store.data(), extents<by_query>(B, H, words, D));
      const tensor_view<const T, by_query, gpu> d_out(d_out_store.data(), extents<by_query>(B, H, words, D));
      const tensor_view<const T, by_key, gpu> k(k_store.data(), extents<by_key>(B, H, words, D));
      const tensor_view<const T, by_key, gpu> v(v_store.data(), extents<by_key>(B, H, words, D));
      const tensor_view<const T, square, gpu> p(p_store.data(), extents<square>(B, H, words, words));
      const tensor_view<const T, square, gpu> ds(ds_store.data(), extents<square>(B, H, words, words));
      tensor<T, square, gpu> scores(B, H, words, words);
      tensor<T, by_query, gpu> by_queries(B, H, words, D);
      tensor<T, by_key, gpu> by_keys(B, H, words, D);
      // Two [·, words, 64] operands and a [·, words, words] result, or the reverse.
      const double bytes = double(B * H * words) * double(2 * D + words) * sizeof(T);
      for (const bool small : {true, false}) {
        cuda_backend::small_products::enabled() = small;
        // [m, k] by [k, n]: the road the product takes (float's larger ones stay on cuBLAS).
        const auto time = [&](const std::string& what, index_t m, index_t n, index_t k,
                              const std::function<void()>& run) {
          const bool attn_kernel = small && cuda_backend::small_products::suits<T>(m, n, k);
          report({"attention " + what + ", " + std::to_string(words) + " words, " + (attn_kernel ? "attn" : "cuBLAS"),
                  type, rows, D, median_us(o.repeat, run), bytes});
        };
        time("Q·Kᵀ", words, words, D, [&] { scores = contract<dk>(q, k); });
        time("dO·Vᵀ", words, words, D, [&] { scores = contract<dk>(d_out, v); });
        time("P·V", words, D, words, [&] { by_queries = contract<src>(p, v); });
        time("dS·K", words, D, words, [&] { by_queries = contract<src>(ds, k); });
        time("Pᵀ·dO", words, D, words, [&] { by_keys = contract<len>(p, d_out); });
        time("dSᵀ·Q", words, D, words, [&] { by_keys = contract<len>(ds, q); });
      }
      cuda_backend::small_products::enabled() = true;
    }
}

template <class T>
void all(const options& o, const std::string& type) {
  const auto wanted = [&](const char* kernel) { return std::ranges::find(o.kernels, kernel) != o.kernels.end(); };
  if (wanted("bias")) column_sums<T>(o, type);
  if (wanted("layer_norm")) layer_norm_backward<T>(o, type);
  if (wanted("embedding")) embedding_gradient<T>(o, type);
  if (wanted("elementwise")) elementwise<T>(o, type);
  if (wanted("loss")) loss<T>(o, type);
  if (wanted("products")) attention_products<T>(o, type);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const options o = parse(argc, argv);
    if (!attn_bench::have_device("primitives_gpu")) return 77;
    attn_bench::spin_up_clocks();
    for (const auto& type : o.types) {
      if (type == "bf16") all<bfloat16>(o, type);
      else if (type == "fp32") all<float>(o, type);
      else throw std::invalid_argument("--types: bf16 or fp32, not " + type);
    }
    std::printf("\n| what | type | rows | width | µs | GB/s |\n|---|---|---:|---:|---:|---:|\n");
    for (const auto& m : measured)
      std::printf("| %s | %s | %lld | %lld | %.1f | %.0f |\n", m.what.c_str(), m.type.c_str(),
                  static_cast<long long>(m.rows), static_cast<long long>(m.width), m.us, m.bytes / m.us / 1000.0);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "primitives_gpu: %s\n", error.what());
    return 1;
  }
  return 0;
}
