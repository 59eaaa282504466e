// Attention on the GPU at the FlashAttention-3 paper's protocol: batch × length = 16 k tokens,
// hidden size 2048 (head dim 64 → 32 heads, 128 → 16), causal and not. Times attn's fused
// kernels (cuda/attn/cuda/fused_attention.cuh, called directly as the model's grad layer calls
// them; in bf16 on CUDA cores and on tensor cores, whichever is the default first, and on tensor
// cores with the deterministic backward too: its cost over dQ summed with atomics) and, up to
// --unfused-max, the unfused path through the grad layer (Q·Kᵀ and P·V by
// cuBLAS, a masked softmax, the [batch, heads, n, n] scores in memory), forward and forward +
// backward, with CUDA events: warm-up runs, then the median of timed runs. One JSON line a
// measurement; bench/attention_vs_torch.py runs it beside PyTorch's and prints the table.
// FLOPs as FlashAttention counts them: forward 4·n²·d·h·batch, halved when causal; backward
// 2.5× the forward. With --alibi, also ALiBi with learned slopes fused (the variant's expression
// evaluated inside the CUDA-core kernels; forward + backward includes the slopes' gradient),
// through grad::fused_attention as a model calls it. With --window W, also restricted attention's
// band (keys within W positions of the query: key_band{−W, W}, restricted:2W+1), fused, its
// FLOPs counted over the pairs the band lets through (4·pairs·d·h·batch forward). With --dropout P,
// also dropout P on the attention weights, fused: on tensor cores every tile then takes the masked
// path, its factor a call a weight; FLOPs counted as without it.
//   attention_gpu [--lengths 512,1024,...] [--types bf16,fp32] [--unfused-max 4096] [--repeat 10] [--alibi]
//                 [--window W] [--dropout P]
#include <attn/cuda/cuda.cuh>
#include <attn/grad.hpp>
#include <attn/nn/attention.hpp>
#include <attn/nn/masks.hpp>

#include <cuda_runtime.h>

#include "gpu_bench.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace attn;
using gpu = attn::cuda;  // not plain `cuda`: CUDA's headers have a namespace of that name
using attn_bench::median_ms;
using attn_bench::random_device;
using attn_bench::random_host;
using attn_bench::split;
using attn_bench::upload;

struct options {
  std::vector<index_t> lengths{512, 1024, 2048, 4096, 8192, 16384};
  std::vector<std::string> types{"bf16", "fp32"};
  index_t tokens = 16384;
  index_t unfused_max = 4096;
  index_t cuda_cores_max = index_t(1) << 40;  // 16-bit types: the CUDA-core kernels up to this length
  int repeat = 10;
  bool alibi = false;
  bool heads_in_rows = false;  // also the tensor-core kernels on [batch, n, heads, d]
  index_t window = 0;          // 0: no band
  double dropout = 0;          // 0: no dropout case
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::puts(
          "attention_gpu: attn's fused and unfused attention on the GPU, FlashAttention-3's protocol\n"
          "  --lengths N,N,...   sequence lengths (default 512,...,16384); batch = tokens / length\n"
          "  --tokens N          batch × length (default 16384)\n"
          "  --types T,T         bf16, fp32 (default both)\n"
          "  --unfused-max N     longest length the unfused path is timed at (default 4096)\n"
          "  --cuda-cores-max N  bf16: longest length the CUDA-core fused kernels are timed at (default all;\n"
          "                      the tensor-core ones at every length)\n"
          "  --repeat N          timed runs, after 2 warm-up runs (default 10)\n"
          "  --alibi             also ALiBi with learned slopes, fused\n"
          "  --heads-in-rows     bf16: also the tensor-core kernels on q, k, v as [batch, n, heads, d] (the\n"
          "                      model's rows, as nn's fused path hands them over); at lengths up to 32\n"
          "                      sentences several a block, and one a block (ATTN_FUSED_PACKING=0's)\n"
          "  --window W          also a band of keys within W positions of each query (restricted attention), fused\n"
          "  --dropout P         also dropout P on the attention weights (not the paper's; tensor2tensor's), fused");
      std::exit(0);
    }
    if (flag == "--heads-in-rows") {
      o.heads_in_rows = true;
      continue;
    }
    if (flag == "--alibi") {
      o.alibi = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value (--help)");
    const std::string value = argv[++i];
    if (flag == "--lengths") {
      o.lengths.clear();
      for (const auto& part : split(value)) o.lengths.push_back(std::stoll(part));
    } else if (flag == "--types") {
      o.types = split(value);
    } else if (flag == "--tokens") {
      o.tokens = std::stoll(value);
    } else if (flag == "--unfused-max") {
      o.unfused_max = std::stoll(value);
    } else if (flag == "--cuda-cores-max") {
      o.cuda_cores_max = std::stoll(value);
    } else if (flag == "--repeat") {
      o.repeat = std::stoi(value);
    } else if (flag == "--window") {
      o.window = std::stoll(value);
      if (o.window < 1) throw std::invalid_argument("--window needs a positive number of positions");
    } else if (flag == "--dropout") {
      o.dropout = std::stod(value);
      if (!(o.dropout > 0 && o.dropout < 1)) throw std::invalid_argument("--dropout needs a probability in (0, 1)");
    } else {
      throw std::invalid_argument("unknown option " + flag + " (--help)");
    }
  }
  return o;
}

struct measurement {
  std::string path, type;
  index_t n, batch, heads, d;
  bool causal;
  double forward_ms, backward_ms;  // backward_ms: forward + backward
  double pairs = 0;                // (query, key) pairs a head of a sentence computes; 0: the protocol's n², halved when causal
};

/// The (query, key) pairs of n positions within `window` of each other (before it alone when causal).
double band_pairs(index_t n, index_t window, bool causal) {
  double pairs = 0;
  for (index_t i = 0; i < n; ++i) {
    const index_t last = std::min(n - 1, causal ? i : i + window), first = std::max<index_t>(0, i - window);
    pairs += double(last - first + 1);
  }
  return pairs;
}

void print(const measurement& m) {
  const double pairs = m.pairs > 0 ? m.pairs : double(m.n) * double(m.n) * (m.causal ? 0.5 : 1.0);
  const double forward_flops = 4.0 * pairs * double(m.d) * double(m.heads) * double(m.batch);
  std::printf(
      "{\"impl\": \"attn %s\", \"type\": \"%s\", \"n\": %lld, \"batch\": %lld, \"heads\": %lld, \"d\": %lld, "
      "\"causal\": %s, \"forward_ms\": %.4f, \"forward_backward_ms\": %.4f, \"forward_tflops\": %.2f, "
      "\"forward_backward_tflops\": %.2f}\n",
      m.path.c_str(), m.type.c_str(), static_cast<long long>(m.n), static_cast<long long>(m.batch),
      static_cast<long long>(m.heads), static_cast<long long>(m.d), m.causal ? "true" : "false", m.forward_ms,
      m.backward_ms, forward_flops / (m.forward_ms * 1e9), 3.5 * forward_flops / (m.backward_ms * 1e9));
  std::fflush(stdout);
}

/// The fused kernels, called as grad::fused_attention calls them (grad::fused_attention_in_rows
/// when in_rows), with `dropout` on the weights.
template <class T, class Rule = every_pair>
measurement fused(const std::string& type, index_t batch, index_t heads, index_t n, index_t d, bool causal,
                  int repeat, const std::string& path = "fused", Rule rule = {}, bool deterministic = false,
                  bool in_rows = false, double dropout = 0) {
  const std::size_t size = static_cast<std::size_t>(batch * heads * n * d);
  T* q = upload(random_host<T>(size, 1));
  T* k = upload(random_host<T>(size, 2));
  T* v = upload(random_host<T>(size, 3));
  T* d_out = upload(random_host<T>(size, 4));
  using A = accumulate_t<T>;
  T* out = static_cast<T*>(memory<gpu>::allocate(size * sizeof(T)));
  A* lse = static_cast<A*>(memory<gpu>::allocate(static_cast<std::size_t>(batch * heads * n) * sizeof(A)));
  T* d_q = static_cast<T*>(memory<gpu>::allocate(size * sizeof(T)));
  T* d_k = static_cast<T*>(memory<gpu>::allocate(size * sizeof(T)));
  T* d_v = static_cast<T*>(memory<gpu>::allocate(size * sizeof(T)));
  fused_attention_problem p;
  p.batch = batch, p.heads = heads, p.kv_heads = heads, p.queries = n, p.keys = n, p.d_k = d, p.d_v = d;
  p.scale = 1 / std::sqrt(double(d));
  p.causal = causal;
  p.deterministic = deterministic;
  p.heads_in_rows = in_rows;
  p.dropout = dropout;
  p.dropout_stream = random_stream(5);
  const T* const no_bias = nullptr;
  measurement m{path, type, n, batch, heads, d, causal, 0, 0};
  m.forward_ms = median_ms(repeat, [&] { fused_attention<gpu>::forward(p, q, k, v, no_bias, out, lse, rule); });
  m.backward_ms = median_ms(repeat, [&] {
    fused_attention<gpu>::forward(p, q, k, v, no_bias, out, lse, rule);
    fused_attention<gpu>::backward(p, q, k, v, no_bias, out, d_out, lse, d_q, d_k, d_v, rule);
  });
  for (void* pointer : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v),
                        static_cast<void*>(d_out), static_cast<void*>(out), static_cast<void*>(lse),
                        static_cast<void*>(d_q), static_cast<void*>(d_k), static_cast<void*>(d_v)})
    memory<gpu>::deallocate(pointer);
  return m;
}

/// ALiBi (Press et al., 2022) with learned slopes, −m_h·|i − j| added to the scaled scores, by
/// grad::fused_attention: the modification evaluated a score at a time inside the kernels, the
/// slopes' gradient summed by the dQ pass. Slopes start at ALiBi's 2^(−8(h+1)/heads).
template <class T, class Heads, class Width>
measurement fused_alibi(const std::string& type, index_t batch, index_t n, bool causal, int repeat,
                        const std::string& path) {
  using B = nn::batch;
  using Q = nn::src;
  using K = nn::keys;
  using S = shape<B, Heads, Q, Width>;
  using KS = shape<B, Heads, K, Width>;
  const index_t heads = Heads::extent, d = Width::extent;
  const auto q0 = random_device<T, S>(batch, n, 1);
  const auto k0 = random_device<T, KS>(batch, n, 2);
  const auto v0 = random_device<T, KS>(batch, n, 3);
  tensor<T, shape<Heads>> host_slopes;
  for (index_t h = 0; h < heads; ++h) host_slopes(h) = T(float(std::exp2(-8.0 * double(h + 1) / double(heads))));
  const auto slopes0 = to_device<gpu>(host_slopes);
  const auto alibi = [](const auto& s, const auto& slopes) {
    return s - broadcast_like(slopes, s) * abs(index_along<Q>(s) - index_along<K>(s));
  };
  const grad::key_visibility<B, gpu> visible{nullptr, causal};
  const auto scale = accumulate_t<T>(1 / std::sqrt(double(d)));
  measurement m{path, type, n, batch, heads, d, causal, 0, 0};
  m.forward_ms = median_ms(repeat, [&] {
    grad::variable<T, S, gpu> q(q0, false);
    grad::variable<T, KS, gpu> k(k0, false), v(v0, false);
    grad::variable<T, shape<Heads>, gpu> slopes(slopes0, false);
    auto out = grad::fused_attention(nullptr, q, k, v, visible, scale, nullptr, every_pair{},
                                     grad::modify_scores(alibi, slopes));
  });
  m.backward_ms = median_ms(repeat, [&] {
    grad::variable<T, S, gpu> q(q0, true);
    grad::variable<T, KS, gpu> k(k0, true), v(v0, true);
    grad::variable<T, shape<Heads>, gpu> slopes(slopes0, true);
    grad::tape tape;
    auto out = grad::fused_attention(&tape, q, k, v, visible, scale, nullptr, every_pair{},
                                     grad::modify_scores(alibi, slopes));
    grad::backward(tape, grad::sum<B>(&tape, grad::sum<Heads>(&tape, grad::sum<Q>(&tape, grad::sum<Width>(&tape, out)))));
  });
  return m;
}

/// The unfused path of nn::scaled_dot_product_attention through the grad layer, with a mask
/// [batch, n, n] made once (as the model makes it once a batch).
template <class T, class Heads, class Width>
measurement unfused(const std::string& type, index_t batch, index_t n, bool causal, int repeat) {
  using S = shape<nn::batch, Heads, nn::src, Width>;
  using KS = shape<nn::batch, Heads, nn::keys, Width>;
  const index_t heads = Heads::extent, d = Width::extent;
  const auto q0 = random_device<T, S>(batch, n, 1);
  const auto k0 = random_device<T, KS>(batch, n, 2);
  const auto v0 = random_device<T, KS>(batch, n, 3);
  tensor<T, shape<nn::batch, nn::src, nn::keys>> host_mask(batch, n, n);
  for (index_t b = 0; b < batch; ++b)
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) host_mask(b, i, j) = causal && j > i ? nn::masked<T> : T(0);
  const auto mask = to_device<gpu>(host_mask);
  measurement m{"unfused", type, n, batch, heads, d, causal, 0, 0};
  m.forward_ms = median_ms(repeat, [&] {
    grad::variable<T, S, gpu> q(q0, false);
    grad::variable<T, KS, gpu> k(k0, false), v(v0, false);
    auto out = nn::scaled_dot_product_attention(nn::context{nullptr}, q, k, v, mask);
  });
  m.backward_ms = median_ms(repeat, [&] {
    grad::variable<T, S, gpu> q(q0, true);
    grad::variable<T, KS, gpu> k(k0, true), v(v0, true);
    grad::tape tape;
    auto out = nn::scaled_dot_product_attention(nn::context{&tape}, q, k, v, mask);
    // Σ out: the backward pass from d_out = 1, as the model's next layer would hand one back.
    grad::backward(tape, grad::sum<nn::batch>(&tape, grad::sum<Heads>(&tape, grad::sum<nn::src>(
                                                          &tape, grad::sum<Width>(&tape, out)))));
  });
  return m;
}

/// Restricted attention's band of keys within o.window positions, fused: the kernels walk only
/// the tiles it reaches.
template <class T>
measurement windowed(const options& o, const std::string& type, index_t batch, index_t heads, index_t n, index_t d,
                     bool causal, const std::string& cores) {
  measurement m = fused<T>(type, batch, heads, n, d, causal, o.repeat, "fused window " + std::to_string(o.window) + cores,
                           key_band{-o.window, o.window});
  m.pairs = band_pairs(n, o.window, causal);
  return m;
}

/// Dropout o.dropout on the weights, fused.
template <class T>
measurement with_dropout(const options& o, const std::string& type, index_t batch, index_t heads, index_t n, index_t d,
                         bool causal, const std::string& cores) {
  char name[32];
  std::snprintf(name, sizeof name, "fused dropout %g", o.dropout);
  return fused<T>(type, batch, heads, n, d, causal, o.repeat, name + cores, every_pair{}, false, false, o.dropout);
}

template <class T, class Heads, class Width>
void lengths(const options& o, const std::string& type) {
  for (const index_t n : o.lengths) {
    const index_t batch = std::max<index_t>(1, o.tokens / n);
    for (const bool causal : {false, true}) {
      if constexpr (is_float16_storage<T>) {  // the tensor-core kernels and the CUDA-core ones
        namespace tensor_cores = cuda_backend::fused_attention_tensor_cores;
        const bool by_default = tensor_cores::enabled();
        for (const bool on_tensor_cores : {false, true}) {
          if (!on_tensor_cores && n > o.cuda_cores_max) continue;
          tensor_cores::enabled() = on_tensor_cores;
          const std::string cores = on_tensor_cores ? " tensor cores" : " cuda cores";
          print(fused<T>(type, batch, Heads::extent, n, Width::extent, causal, o.repeat, "fused" + cores));
          // The deterministic backward's cost: on tensor cores dQ by a kernel of its own rather
          // than summed with atomics by the dK/dV kernel (the CUDA-core kernels always do so).
          if (on_tensor_cores)
            print(fused<T>(type, batch, Heads::extent, n, Width::extent, causal, o.repeat,
                           "fused" + cores + " deterministic", every_pair{}, true));
          if (on_tensor_cores && o.heads_in_rows) {
            // Sentences of up to half a tile several a block (block_sentences), and one a block.
            print(fused<T>(type, batch, Heads::extent, n, Width::extent, causal, o.repeat,
                           "fused" + cores + " heads in rows", every_pair{}, false, true));
            if (2 * n <= tensor_cores::tile_rows) {
              const bool packs = tensor_cores::packs_sentences();
              tensor_cores::packs_sentences() = false;
              print(fused<T>(type, batch, Heads::extent, n, Width::extent, causal, o.repeat,
                             "fused" + cores + " heads in rows one sentence a block", every_pair{}, false, true));
              tensor_cores::packs_sentences() = packs;
            }
          }
          if (o.alibi) print(fused_alibi<T, Heads, Width>(type, batch, n, causal, o.repeat, "fused alibi" + cores));
          if (o.window > 0) print(windowed<T>(o, type, batch, Heads::extent, n, Width::extent, causal, cores));
          if (o.dropout > 0) print(with_dropout<T>(o, type, batch, Heads::extent, n, Width::extent, causal, cores));
        }
        tensor_cores::enabled() = by_default;
      } else {
        print(fused<T>(type, batch, Heads::extent, n, Width::extent, causal, o.repeat));
        if (o.alibi) print(fused_alibi<T, Heads, Width>(type, batch, n, causal, o.repeat, "fused alibi"));
        if (o.window > 0) print(windowed<T>(o, type, batch, Heads::extent, n, Width::extent, causal, ""));
        if (o.dropout > 0) print(with_dropout<T>(o, type, batch, Heads::extent, n, Width::extent, causal, ""));
      }
      if (n <= o.unfused_max) print(unfused<T, Heads, Width>(type, batch, n, causal, o.repeat));
      // What the unfused path's [batch, heads, n, n] tensors took goes back to the driver.
      ATTN_CUDA_CHECK(cudaDeviceSynchronize());
      if (cudaMemPool_t pool = cuda_backend::device_pool()) ATTN_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    }
  }
}

template <class T>
void widths(const options& o, const std::string& type) {
  lengths<T, dim<"heads", 32>, dim<"d_k", 64>>(o, type);
  lengths<T, dim<"heads", 16>, dim<"d_k", 128>>(o, type);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const options o = parse(argc, argv);
    if (!attn_bench::have_device("attention_gpu")) return 77;
    for (const auto& type : o.types) {
      if (type == "bf16") widths<bfloat16>(o, type);
      else if (type == "fp32") widths<float>(o, type);
      else throw std::invalid_argument("--types: bf16 or fp32, not " + type);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "attention_gpu: %s\n", error.what());
    return 1;
  }
  return 0;
}
