// Fused against unfused attention on the CPU: eq. (1) for one sentence of n tokens, 8 heads of
// d_k = d_v = 64 (d_model 512), n = 256 … 8192, causal and not, forward and forward + backward,
// with the peak bytes of the tensors each allocated beyond its inputs. Unfused: Q·Kᵀ, a masked
// softmax and the product with V, [8, n, n] tensors in between (nn::scaled_dot_product_attention);
// fused: the tiled kernel (grad::fused_attention), which keeps one log-sum-exp a query row.
//   build/bench/bench_fused_attention --benchmark_out=fused.json --benchmark_out_format=json
// The fused kernel's own scratch (a 128×128 tile of scores and a few of their kind a thread, one
// number a query row in the backward, and the dQ of the backward's chunks of key tiles when the
// sentences × heads are fewer than 64) is outside the counters: O(n).
// attention_decode: 4 queries (a beam step's hypotheses) against n = 64 … 4096 keys, forward.
// attention_batch: the same in batches of 4096 tokens, sentences of n = 16 … 1024 tokens
// (training's shape: the paper's batches are ~25 000 tokens of sentences of tens of tokens).
// attention_alibi: ALiBi with learned slopes (a score modification with a learned input) in
// causal self-attention through nn::variant_attention, either path forced, n = 256 … 4096.
// attention_rule: a window |i − j| ≤ 64 in causal self-attention, unfused, fused with the rule
// folded into a bias, asked a pair at a time (grad::pair_rule), or as a band (key_band).
#include <attn/attn.hpp>

#include "attention_cases.hpp"

namespace {

using namespace attn;
using heads = dim<"heads", 8>;
using d_k = dim<"d_k", 64>;
using S = shape<nn::batch, heads, nn::src, d_k>;
using KS = shape<nn::batch, heads, nn::keys, d_k>;

template <class Device>
void attention_core(benchmark::State& state, bool fused, bool causal, bool backward, index_t tokens,
                    index_t queries) {
  using A = float;
  const index_t n = state.range(0);
  const index_t sentences = tokens > 0 ? std::max<index_t>(1, tokens / n) : 1;
  const index_t rows = queries > 0 ? queries : n;  // queries: a decoding step's few, else n
  tensor<A, S> host_q(sentences, rows);
  tensor<A, KS> host_k(sentences, n), host_v(sentences, n);
  attn_bench::fill(host_q.data(), host_q.size(), 1);
  attn_bench::fill(host_k.data(), host_k.size(), 2);
  attn_bench::fill(host_v.data(), host_v.size(), 3);
  const auto q0 = to_device<Device>(host_q);
  const auto k0 = to_device<Device>(host_k);
  const auto v0 = to_device<Device>(host_v);
  // The unfused path's mask, made outside the measurement as the model makes it once a batch.
  const auto mask = [&] {
    tensor<A, shape<nn::batch, nn::src, nn::keys>> host_mask(sentences, fused ? 0 : rows, fused ? 0 : n);
    if (causal && !fused)
      for (index_t b = 0; b < sentences; ++b)
        for (index_t i = 0; i < n; ++i)
          for (index_t j = i + 1; j < n; ++j) host_mask(b, i, j) = nn::masked<A>;
    return to_device<Device>(host_mask);
  }();
  const grad::key_visibility<nn::batch, Device> visible{nullptr, causal};
  const A scale = A(1) / std::sqrt(A(d_k::extent));
  std::size_t peak = 0;
  A last = 0;
  for (auto _ : state) {
    // Fresh inputs each iteration, so that no gradient of the last one is alive beside this one's.
    grad::variable<A, S, Device> q(q0, backward);
    grad::variable<A, KS, Device> k(k0, backward), v(v0, backward);
    if (attn_bench::peak_memory<Device>::known) attn_bench::peak_memory<Device>::reset();
    grad::tape tape;
    grad::tape* t = backward ? &tape : nullptr;
    auto out = fused ? grad::fused_attention(t, q, k, v, visible, scale)
                     : nn::scaled_dot_product_attention(nn::context{t}, q, k, v, mask);
    if (backward) {
      grad::backward(tape, grad::sum<nn::batch>(t, grad::sum<heads>(t, grad::sum<nn::src>(t, grad::sum<d_k>(t, out)))));
      memory<Device>::copy_to_host(&last, q.grad().data(), sizeof(A));  // waits for the device
    } else {
      memory<Device>::copy_to_host(&last, out.value().data(), sizeof(A));
    }
    peak = std::max(peak, attn_bench::peak_memory<Device>::bytes());
  }
  benchmark::DoNotOptimize(last);
  // FLOPs of the two products, as FlashAttention counts them: 4·n²·d·h, halved when causal.
  const double flops = 4.0 * double(rows) * double(n) * d_k::extent * heads::extent * (causal ? 0.5 : 1.0) *
                       (backward ? 3.5 : 1.0) * double(sentences);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["n"] = double(n);
  state.counters["sentences"] = double(sentences);
  if (attn_bench::peak_memory<Device>::known) state.counters["bytes_peak"] = double(peak);
}

struct alibi_config : nn::config<nn::widths<512, 2048, 8, 64, 64>> {};

/// Causal self-attention of one sentence of n tokens through nn::variant_attention with variant
/// V (made from `spec`), either path forced. The model's causal mask of a sentence without
/// padding: the fused path reads its length and causality, the unfused one its bias, built at
/// the first iteration as once a batch, or at every one (`mask_each_time`: a folded rule's bias
/// then counts in each).
template <class Device, template <class, class, class> class V>
void causal_sentence(benchmark::State& state, const char* spec, bool fused, bool backward, bool mask_each_time) {
  using A = float;
  using C = alibi_config;
  using QS = shape<nn::batch, C::heads, nn::tgt, C::d_k>;
  using KVS = shape<nn::batch, C::heads, nn::keys, C::d_k>;
  const index_t n = state.range(0);
  tensor<A, QS> host_q(1, n);
  tensor<A, KVS> host_k(1, n), host_v(1, n);
  attn_bench::fill(host_q.data(), host_q.size(), 1);
  attn_bench::fill(host_k.data(), host_k.size(), 2);
  attn_bench::fill(host_v.data(), host_v.size(), 3);
  const auto q0 = to_device<Device>(host_q);
  const auto k0 = to_device<Device>(host_k);
  const auto v0 = to_device<Device>(host_v);
  tensor<nn::token, shape<nn::batch, nn::tgt>> ids(1, n);
  for (index_t i = 0; i < n; ++i) ids(0, i) = 1;
  const auto causal = [&] { return nn::causal_mask<A>(to_device<Device>(ids), 0); };
  const auto first_mask = causal();
  random_stream init(1);
  const auto variant =
      nn::make_variant<V<A, C, Device>>(init, nn::attention_kind::decoder_self, nn::variant_spec::parse(spec));
  const auto path = fused ? nn::attention_path::fused : nn::attention_path::unfused;
  std::size_t peak = 0;
  A last = 0;
  for (auto _ : state) {
    grad::variable<A, QS, Device> q(q0, backward);
    grad::variable<A, KVS, Device> k(k0, backward), v(v0, backward);
    const auto mask = mask_each_time ? causal() : first_mask;  // a copy shares the first's bias
    if (attn_bench::peak_memory<Device>::known) attn_bench::peak_memory<Device>::reset();
    grad::tape tape;
    grad::tape* t = backward ? &tape : nullptr;
    auto out = nn::variant_attention(variant, nn::context{t, nullptr, nullptr, path}, q, k, v, mask,
                                     nn::attention_kind::decoder_self);
    if (backward) {
      grad::backward(tape, grad::sum<nn::batch>(t, grad::sum<C::heads>(t, grad::sum<nn::tgt>(t, grad::sum<C::d_k>(t, out)))));
      memory<Device>::copy_to_host(&last, q.grad().data(), sizeof(A));
    } else {
      memory<Device>::copy_to_host(&last, out.value().data(), sizeof(A));
    }
    peak = std::max(peak, attn_bench::peak_memory<Device>::bytes());
  }
  benchmark::DoNotOptimize(last);
  state.counters["n"] = double(n);
  if (attn_bench::peak_memory<Device>::known) state.counters["bytes_peak"] = double(peak);
}

template <class Device>
void attention_alibi(benchmark::State& state, bool fused, bool backward) {
  causal_sentence<Device, nn::alibi>(state, "alibi:learned", fused, backward, false);
}

/// Restricted attention's window, |i − j| ≤ 64, as an expression alone: the fused kernel asks
/// it a pair at a time (grad::pair_rule).
template <class T, class C, class Device>
struct window_expression {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(64);
  }
};
/// The same window, made to read the sentence's index (times 0): nn folds it into a
/// [batch, queries, keys] bias, as it folded every rule without a kernel form before pair_rule.
template <class T, class C, class Device>
struct window_folded {
  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(64) + value_t<I>(0) * index_along<nn::batch>(query);
  }
};

/// Causal self-attention under the window |i − j| ≤ 64, one sentence of n tokens, a fresh mask
/// each iteration: unfused (products, the rule folded into the mask), fused with the rule folded
/// into a bias, fused with the rule asked a pair at a time, and fused with its kernel form
/// (restricted:129, key_band).
template <class Device, template <class, class, class> class V>
void attention_rule(benchmark::State& state, bool fused, bool backward, const char* spec) {
  causal_sentence<Device, V>(state, spec, fused, backward, true);
}

/// The usual settings of a case: lengths lo, 2·lo, …, hi; milliseconds of wall time.
benchmark::internal::Benchmark* lengths(benchmark::internal::Benchmark* b, index_t lo, index_t hi) {
  return b->RangeMultiplier(2)->Range(lo, hi)->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseRealTime();
}

template <class Device>
void register_cases(const std::string& device) {
  const auto path = [](bool fused) { return fused ? std::string("/fused") : std::string("/unfused"); };
  const auto pass = [](bool backward) { return backward ? std::string("/fwd_bwd") : std::string("/fwd"); };
  for (bool fused : {false, true})
    for (bool backward : {false, true}) {
      const std::string name = "attention_alibi/" + device + path(fused) + "/causal" + pass(backward);
      lengths(benchmark::RegisterBenchmark(name.c_str(), attention_alibi<Device>, fused, backward), 16, 4096);
    }
  for (bool backward : {false, true}) {
    const auto name = [&](const char* form) { return "attention_rule/" + device + "/" + form + "/causal" + pass(backward); };
    lengths(benchmark::RegisterBenchmark(name("unfused").c_str(), attention_rule<Device, window_expression>, false,
                                         backward, ""),
            256, 4096);
    lengths(benchmark::RegisterBenchmark(name("folded").c_str(), attention_rule<Device, window_folded>, true,
                                         backward, ""),
            256, 4096);
    lengths(benchmark::RegisterBenchmark(name("pairs").c_str(), attention_rule<Device, window_expression>, true,
                                         backward, ""),
            256, 4096);
    lengths(benchmark::RegisterBenchmark(name("band").c_str(), attention_rule<Device, nn::restricted>, true, backward,
                                         "restricted:129"),
            256, 4096);
  }
  // One sentence of n tokens; training's shape, 4096 tokens a batch in sentences of n tokens.
  struct shape_case {
    const char* name;
    index_t tokens, lo, hi;
  };
  for (const shape_case c : {shape_case{"attention_core/", 0, 256, 8192}, shape_case{"attention_batch/", 4096, 16, 1024}})
    for (bool fused : {false, true})
      for (bool causal : {false, true})
        for (bool backward : {false, true}) {
          const std::string name =
              c.name + device + path(fused) + (causal ? "/causal" : "/full") + pass(backward);
          lengths(benchmark::RegisterBenchmark(name.c_str(), attention_core<Device>, fused, causal, backward, c.tokens,
                                               index_t{0}),
                  c.lo, c.hi);
        }
  // A beam-search step's shape: 4 hypotheses of one sentence against n keys, forward only.
  for (bool fused : {false, true}) {
    const std::string name = "attention_decode/" + device + path(fused) + "/full/fwd";
    lengths(benchmark::RegisterBenchmark(name.c_str(), attention_core<Device>, fused, false, false, index_t{0},
                                         index_t{4}),
            64, 4096);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_cases<attn::cpu>("cpu");
  return attn_bench::run_registered(argc, argv);
}
