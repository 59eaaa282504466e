// One fused attention call, forward and backward through grad::fused_attention, written once
// over the device: fused_attention_cpu.cpp instantiates it for the CPU (g++, Eigen: the CPU
// kernel, itself tested against plain loops in tests/unit), fused_attention_test.cu for the GPU
// (nvcc), and the test compares the two. Inputs come from a seeded generator on the host, so both
// sides see the same numbers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <random>
#include <string>
#include <vector>

#include <attn/core.hpp>
#include <attn/grad/fused_attention.hpp>

namespace fused_case {

using attn::index_t;

/// A variant's score modification, with learned inputs (a number a head): ALiBi's slopes,
/// −m_h·|i − j|, or a soft cap c_h·tanh(s / c_h).
enum class modification { none, alibi, soft_cap };

struct sizes {
  index_t batch, heads, kv_heads, queries, keys, d_k, d_v;
  bool causal = false;
  index_t first_query = 0;
  bool padded = false;  // the last sentence's keys end early (none at all when `empty`)
  bool biased = false;  // an additive bias [batch, queries, keys], some pairs hidden
  double dropout = 0;   // on the weights, from a fixed stream
  bool empty = false;   // with padded: the last sentence has no keys (rows with nothing to see)
  modification modified = modification::none;
  bool learns = true;  // with `modified`: its inputs want gradients (without, a GPU sums dQ with atomics)
  std::optional<attn::key_band> band = {};  // a rule (restricted attention's), with no modification
  bool band_as_expression = false;  // the band given as an expression (grad::pair_rule)
  bool heads_in_rows = false;  // q, k, v and out as [batch, length, heads, d] (fused_attention_in_rows)
  bool ragged = false;  // every sentence's keys end at a place of its own (after `padded`'s)

  std::string str() const {
    return "b" + std::to_string(batch) + " h" + std::to_string(heads) + "/" + std::to_string(kv_heads) + " q" +
           std::to_string(queries) + " k" + std::to_string(keys) + " d" + std::to_string(d_k) + "/" +
           std::to_string(d_v) + (causal ? " causal" : "") + (first_query ? " from " + std::to_string(first_query) : "") +
           (padded ? " padded" : "") + (biased ? " bias" : "") + (dropout > 0 ? " dropout" : "") + (empty ? " empty" : "") +
           (modified == modification::alibi ? " alibi" : modified == modification::soft_cap ? " soft cap" : "") +
           (modified != modification::none && !learns ? " frozen" : "") +
           (band ? " band " + std::to_string(band->first) + ".." + std::to_string(band->last) : "") +
           (band_as_expression ? " as an expression" : "") + (heads_in_rows ? " in rows" : "") +
           (ragged ? " ragged" : "");
  }
};

/// Where sentence b's keys end: at `keys`, but for the last sentence when padded (half of them,
/// or none when empty) and every sentence when ragged (keys − 3b mod keys, from the keys' end
/// down in steps of three).
inline index_t key_length(const sizes& z, index_t b) {
  if (z.padded && b == z.batch - 1) return z.empty ? 0 : (z.keys + 1) / 2;
  return z.ragged ? z.keys - 3 * b % z.keys : z.keys;
}

/// Whether T runs case z: a band given as an expression runs in float and bfloat16 alone. Its
/// plan is the same for every type; its kernels, one rule more for every kernel of every type,
/// added a fifth to fused_attention_test.cu's compile time for the four types.
template <class T>
inline constexpr bool takes_rule_expressions = std::is_same_v<T, float> || std::is_same_v<T, attn::bfloat16>;
template <class T>
bool runs(const sizes& z) {
  return !z.band_as_expression || takes_rule_expressions<T>;
}

/// z's band first ≤ j − i ≤ last as an expression over the pairs [1, positions, keys] (as nn's
/// variants give their rules: grad::pair_rule), which the kernels ask a pair at a time: the CPU
/// kernel by element_at, the GPU's by its plan (cuda/attn/cuda/mask_rule.cuh), whatever device
/// the expression names (it reads no memory). The distance from the band's middle, in float:
/// exact at these positions.
inline auto band_expression(const sizes& z) {
  using namespace attn;
  const float middle = float(z.band->first + z.band->last) / 2, half = float(z.band->last - z.band->first) / 2;
  return grad::pair_rule{grad::over_pairs<float, dim<"batch">, dim<"queries">, dim<"keys">>(
      [&](const auto& query, const auto& key) { return abs(key - query - middle) <= half; }, z.first_query + z.queries,
      z.keys)};
}

/// The setting that `setting()` returns (a switch of the cases' own or of the kernels' launches,
/// or a limit of the emulator's runtime), set until the end of the scope.
template <auto setting>
struct set_while {
  using value_type = std::remove_reference_t<decltype(setting())>;
  value_type before = setting();
  explicit set_while(value_type value) { setting() = value; }
  ~set_while() { setting() = before; }
  set_while(const set_while&) = delete;
  set_while& operator=(const set_while&) = delete;
};

/// Whether the backward must give the same bits every run (fused_attention_problem::
/// deterministic): on a GPU's tensor cores the dQ kernel instead of dQ summed with atomics by the
/// dK/dV kernel. Set for a scope by deterministic_while.
inline bool& deterministic() {
  static bool on = false;
  return on;
}
using deterministic_while = set_while<deterministic>;

/// The output and every input's gradient (the modification's learned inputs' too; empty without),
/// q, k, v and out as [batch, heads, length, d] whatever the case's layout.
struct result {
  std::vector<double> out, d_q, d_k, d_v, d_modification;
};

/// x [batch, heads, length, width] as [batch, length, heads, width] (heads_in_rows), or back
/// (`into_rows` false).
template <class E>
std::vector<E> heads_moved(const std::vector<E>& x, index_t batch, index_t heads, index_t length, index_t width,
                           bool into_rows) {
  std::vector<E> moved(x.size());
  for (index_t b = 0; b < batch; ++b)
    for (index_t h = 0; h < heads; ++h)
      for (index_t i = 0; i < length; ++i)
        for (index_t c = 0; c < width; ++c) {
          const auto split = std::size_t(((b * heads + h) * length + i) * width + c);
          const auto rows = std::size_t(((b * length + i) * heads + h) * width + c);
          if (into_rows) moved[rows] = x[split];
          else moved[split] = x[rows];
        }
  return moved;
}

template <class T, class Device>
result run(const sizes& z, unsigned seed) {
  using namespace attn;
  using B = dim<"batch">;
  using H = dim<"heads">;
  using G = dim<"kv_heads">;
  using Q = dim<"queries">;
  using K = dim<"keys">;
  using DK = dim<"d_k">;
  using DV = dim<"d_v">;
  std::mt19937 generator(seed);
  const auto of = [](double x) {
    if constexpr (is_float16_storage<T>) return T(float(x));
    else return T(x);
  };
  const auto random = [&](auto sizes, double lo = -1, double hi = 1) {
    tensor<T, typename decltype(sizes)::shape_type, cpu> host(sizes);
    std::uniform_real_distribution<double> u(lo, hi);
    for (index_t i = 0; i < host.size(); ++i) host.data()[i] = of(u(generator));
    return host;
  };
  const auto q_host = random(extents<shape<B, H, Q, DK>>(z.batch, z.heads, z.queries, z.d_k));
  const auto k_host = random(extents<shape<B, G, K, DK>>(z.batch, z.kv_heads, z.keys, z.d_k));
  const auto v_host = random(extents<shape<B, G, K, DV>>(z.batch, z.kv_heads, z.keys, z.d_v));
  const auto r_host = random(extents<shape<B, H, Q, DV>>(z.batch, z.heads, z.queries, z.d_v));
  auto bias_host = random(extents<shape<B, Q, K>>(z.batch, z.queries, z.keys), -2, 2);
  for (index_t i = 0; i < bias_host.size(); ++i)  // a tenth of the pairs hidden (float16's −1e9 is −∞)
    if (bias_host.data()[i] < of(-1.6)) bias_host.data()[i] = of(-1e9);
  const auto per_head = random(extents<shape<H>>(z.heads), 0.1, 1);  // slopes in (0.1, 1), caps in (2, 5)
  grad::variable<T, shape<H>, Device> learned(
      to_device<Device>(z.modified == modification::soft_cap ? random(extents<shape<H>>(z.heads), 2, 5) : per_head),
      z.learns);
  tensor<index_t, shape<B>, cpu> lengths_host(extents<shape<B>>(z.batch));
  for (index_t b = 0; b < z.batch; ++b) lengths_host(b) = key_length(z, b);

  grad::variable<T, shape<B, H, Q, DK>, Device> q(to_device<Device>(q_host), true);
  grad::variable<T, shape<B, G, K, DK>, Device> k(to_device<Device>(k_host), true);
  grad::variable<T, shape<B, G, K, DV>, Device> v(to_device<Device>(v_host), true);
  const auto bias = to_device<Device>(bias_host);
  const auto lengths = to_device<Device>(lengths_host);
  random_stream stream(11, 123);
  grad::tape t;
  const grad::key_visibility<B, Device> visible{&lengths, z.causal, z.first_query};
  const auto scale = accumulate_t<T>(1 / std::sqrt(double(z.d_k)));
  const auto* b = z.biased ? &bias : nullptr;
  const grad::weight_dropout dropout{z.dropout, &stream};
  const auto backward = deterministic() ? grad::fused_backward::deterministic : grad::fused_backward::fastest;
  const auto first = accumulate_t<T>(z.first_query);
  const auto alibi = [first](const auto& s, const auto& slopes) {
    return s - broadcast_like(slopes, s) * abs(index_along<Q>(s, first) - index_along<K>(s));
  };
  const auto soft_cap = [](const auto& s, const auto& cap) {
    return broadcast_like(cap, s) * tanh(s / broadcast_like(cap, s));
  };
  const auto doubles = [](const auto& x) {
    const auto host = to_host(x);
    return std::vector<double>(host.data(), host.data() + host.size());
  };
  // With heads_in_rows, the same numbers as [batch, length, heads · d], the heads side by side.
  using QW = dim<"query_width">;
  using KW = dim<"key_width">;
  using VW = dim<"value_width">;
  using W = dim<"output_width">;
  const auto in_rows = [&]<class S>(const auto& split, index_t length, index_t heads, index_t width) {
    const std::vector<T> numbers(split.data(), split.data() + split.size());
    const auto moved = heads_moved(numbers, z.batch, heads, length, width, true);
    tensor<T, S, cpu> rows(extents<S>(z.batch, length, heads * width));
    std::copy(moved.begin(), moved.end(), rows.data());
    return to_device<Device>(rows);
  };
  const auto split_doubles = [&](const auto& rows, index_t length, index_t heads, index_t width) {
    return heads_moved(doubles(rows), z.batch, heads, length, width, false);
  };
  grad::variable<T, shape<B, Q, QW>, Device> q_rows(
      in_rows.template operator()<shape<B, Q, QW>>(q_host, z.queries, z.heads, z.d_k), true);
  grad::variable<T, shape<B, K, KW>, Device> k_rows(
      in_rows.template operator()<shape<B, K, KW>>(k_host, z.keys, z.kv_heads, z.d_k), true);
  grad::variable<T, shape<B, K, VW>, Device> v_rows(
      in_rows.template operator()<shape<B, K, VW>>(v_host, z.keys, z.kv_heads, z.d_v), true);

  const auto call = [&](const auto& rule, const auto& modify) -> result {
    const auto learned_gradient = [&] {
      return z.modified == modification::none || !z.learns ? std::vector<double>{} : doubles(learned.grad());
    };
    if (z.heads_in_rows) {
      const auto out = grad::fused_attention_in_rows<H, W>(&t, {z.heads, z.kv_heads}, q_rows, k_rows, v_rows, visible,
                                                           scale, b, rule, modify, dropout, backward);
      out.accumulate(in_rows.template operator()<shape<B, Q, W>>(r_host, z.queries, z.heads, z.d_v));
      t.replay();
      return {split_doubles(out.value(), z.queries, z.heads, z.d_v),
              split_doubles(q_rows.grad(), z.queries, z.heads, z.d_k),
              split_doubles(k_rows.grad(), z.keys, z.kv_heads, z.d_k),
              split_doubles(v_rows.grad(), z.keys, z.kv_heads, z.d_v), learned_gradient()};
    }
    const auto out = grad::fused_attention(&t, q, k, v, visible, scale, b, rule, modify, dropout, backward);
    out.accumulate(to_device<Device>(r_host));  // the gradient of Σ out ⊙ r
    t.replay();
    return {doubles(out.value()), doubles(q.grad()), doubles(k.grad()), doubles(v.grad()), learned_gradient()};
  };
  if constexpr (takes_rule_expressions<T>) {
    if (z.band_as_expression) return call(band_expression(z), unmodified{});
  }
  if (z.modified == modification::alibi) return call(every_pair{}, grad::modify_scores(alibi, learned));
  if (z.modified == modification::soft_cap) return call(every_pair{}, grad::modify_scores(soft_cap, learned));
  if (z.band) return call(*z.band, unmodified{});
  return call(every_pair{}, unmodified{});
}

/// run_kernel's modification: none.
struct no_modification {
  template <class A>
  attn::unmodified operator()(const A* /*learned*/, const sizes&) const {
    return {};
  }
};

/// The kernel alone (fused_attention<Device>), for the 16-bit types, which grad does not take yet:
/// inputs of T, log-sum-exp in float, the output's gradient r. With a modified case, make(learned,
/// z) gives the modification the kernel takes, over a number a head in Device memory (slopes in
/// (0.1, 1) or caps in (2, 5)), and the result has their gradients.
template <class T, class Device, class Make = no_modification>
result run_kernel(const sizes& z, unsigned seed, const Make& make = {}) {
  using namespace attn;
  using A = accumulate_t<T>;
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  const auto random = [&](index_t n) {
    std::vector<T> x(static_cast<std::size_t>(n));
    for (auto& e : x) e = T(float(u(generator)));
    return x;
  };
  const index_t q_size = z.batch * z.heads * z.queries * z.d_k, k_size = z.batch * z.kv_heads * z.keys * z.d_k,
                v_size = z.batch * z.kv_heads * z.keys * z.d_v, out_size = z.batch * z.heads * z.queries * z.d_v,
                bias_size = z.batch * z.queries * z.keys, rows = z.batch * z.heads * z.queries;
  const auto q = random(q_size), k = random(k_size), v = random(v_size), r = random(out_size);
  auto bias = random(bias_size);
  for (auto& e : bias)
    if (float(e) < -0.8f) e = T(-1e9f);  // a tenth of the pairs hidden (at or below hidden_bias; float16's is −∞)
  std::vector<index_t> lengths(static_cast<std::size_t>(z.batch));
  for (index_t b = 0; b < z.batch; ++b) lengths[std::size_t(b)] = key_length(z, b);

  // Device memory freed however the call ends: a launch that throws (a refusal the tests ask
  // for) would otherwise leak every buffer, which LeakSanitizer reports at the emulator's exit.
  struct owned_blocks {
    std::vector<void*> blocks;
    void* keep(std::size_t bytes) {
      blocks.reserve(blocks.size() + 1);  // before the allocation, so that no block is left unowned
      return blocks.emplace_back(memory<Device>::allocate(bytes));
    }
    owned_blocks() = default;
    owned_blocks(const owned_blocks&) = delete;
    owned_blocks& operator=(const owned_blocks&) = delete;
    ~owned_blocks() {
      for (void* x : blocks) memory<Device>::deallocate(x);
    }
  } owned;
  const auto fresh = [&owned](auto* like, index_t n) {
    using E = std::remove_pointer_t<decltype(like)>;
    return static_cast<E*>(owned.keep(std::size_t(std::max<index_t>(1, n)) * sizeof(E)));
  };
  const auto on_device = [&fresh](const auto& host) {
    using E = typename std::decay_t<decltype(host)>::value_type;
    E* const x = fresh(static_cast<E*>(nullptr), index_t(host.size()));
    memory<Device>::copy_from_host(x, host.data(), host.size() * sizeof(E));
    return x;
  };
  // With heads_in_rows, the kernels read and write [batch, length, heads, d].
  const auto laid_out = [&](const std::vector<T>& x, index_t heads, index_t length, index_t width) {
    return z.heads_in_rows ? heads_moved(x, z.batch, heads, length, width, true) : x;
  };
  T* const q_d = on_device(laid_out(q, z.heads, z.queries, z.d_k));
  T* const k_d = on_device(laid_out(k, z.kv_heads, z.keys, z.d_k));
  T* const v_d = on_device(laid_out(v, z.kv_heads, z.keys, z.d_v));
  T* const r_d = on_device(laid_out(r, z.heads, z.queries, z.d_v));
  T* const bias_d = on_device(bias);
  index_t* const lengths_d = on_device(lengths);
  T* const out_d = fresh(q_d, out_size);
  A* const lse_d = fresh(static_cast<A*>(nullptr), rows);
  T* const d_q_d = fresh(q_d, q_size);
  T* const d_k_d = fresh(q_d, k_size);
  T* const d_v_d = fresh(q_d, v_size);

  fused_attention_problem p;
  p.batch = z.batch, p.heads = z.heads, p.kv_heads = z.kv_heads, p.queries = z.queries, p.keys = z.keys;
  p.d_k = z.d_k, p.d_v = z.d_v, p.scale = 1 / std::sqrt(double(z.d_k));
  p.key_lengths = lengths_d, p.causal = z.causal, p.first_query = z.first_query;
  p.deterministic = deterministic();
  p.heads_in_rows = z.heads_in_rows;
  if (z.dropout > 0) p.dropout = z.dropout, p.dropout_stream = random_stream(11, 123);
  const T* b = z.biased ? bias_d : nullptr;
  const bool modified = z.modified != modification::none, learning = modified && z.learns;
  std::vector<A> learned;
  for (index_t h = 0; modified && h < z.heads; ++h)
    learned.push_back(A(z.modified == modification::soft_cap ? 2 + 1.5 * (1 + u(generator)) : 0.55 + 0.45 * u(generator)));
  A* const learned_d = on_device(learned);
  A* const d_learned_d = fresh(learned_d, z.heads);
  const auto m = make(static_cast<const A*>(learned_d), z);
  const auto call = [&](auto rule) {
    fused_attention<Device>::forward(p, q_d, k_d, v_d, b, out_d, lse_d, rule, m);
    fused_attention<Device>::backward(p, q_d, k_d, v_d, b, out_d, r_d, lse_d, d_q_d, d_k_d, d_v_d, rule, m,
                                      learning ? d_learned_d : nullptr);
  };
  if constexpr (std::is_same_v<Make, no_modification>) {
    if (z.band_as_expression) {
      if constexpr (takes_rule_expressions<T>) call(band_expression(z));
    } else if (z.band) {
      call(*z.band);
    } else {
      call(every_pair{});
    }
  } else {
    call(every_pair{});
  }

  const auto doubles = [](const auto* x, index_t n) {
    std::vector<std::remove_cvref_t<decltype(*x)>> host(static_cast<std::size_t>(n));
    memory<Device>::copy_to_host(host.data(), x, host.size() * sizeof(host[0]));
    return std::vector<double>(host.begin(), host.end());
  };
  const auto split = [&](const std::vector<double>& x, index_t heads, index_t length, index_t width) {
    return z.heads_in_rows ? heads_moved(x, z.batch, heads, length, width, false) : x;
  };
  result got{split(doubles(out_d, out_size), z.heads, z.queries, z.d_v),
             split(doubles(d_q_d, q_size), z.heads, z.queries, z.d_k),
             split(doubles(d_k_d, k_size), z.kv_heads, z.keys, z.d_k),
             split(doubles(d_v_d, v_size), z.kv_heads, z.keys, z.d_v),
             learning ? doubles(d_learned_d, z.heads) : std::vector<double>{}};
  return got;
}

/// The cases both sides run: lengths 1, 17, 128, 129 and 1000, head widths 32, 64 and 128,
/// padding (a sentence with no keys too), causal (and shifted) masks, a bias, grouped and
/// multi-query heads, dropout, ALiBi and a soft cap with learned inputs, bands of keys, in the
/// kernels' form and as expressions, the heads in rows, and short sentences in rows with keys
/// that end where each sentence's own length says (several sentences a block on tensor cores).
inline std::vector<sizes> cases() {
  std::vector<sizes> all;
  for (index_t length : {1, 17, 128, 129, 1000})
    for (index_t d : {32, 64, 128}) {
      if (length == 1000 && d != 64) continue;  // the long case once
      all.push_back({2, 4, 4, length, length, d, d, false, 0, true});
      all.push_back({2, 4, 2, length, length, d, d, true, 0, true});
    }
  all.push_back({2, 4, 1, 70, 95, 64, 32, true, 25, false, true});  // multi-query, decoding-like shift, bias
  all.push_back({3, 2, 2, 65, 67, 40, 24, false, 0, true, true});   // odd head widths
  all.push_back({2, 2, 2, 33, 40, 33, 20});                         // an odd d_k: dQ's last column alone
  all.push_back({2, 4, 2, 129, 129, 64, 64, true, 0, true, true, 0.2});   // dropout, bias, grouped heads
  all.push_back({2, 2, 2, 40, 100, 64, 64, true, 10, true});             // causal ends before the keys do
  all.push_back({2, 2, 1, 33, 33, 32, 32, false, 0, true, false, 0, true});  // a sentence with no keys
  // Score modifications with learned inputs (score_modification.cuh on the GPU).
  using enum modification;
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = 64, .d_v = 64,
                 .causal = true, .padded = true, .modified = alibi});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 1, .queries = 70, .keys = 95, .d_k = 64, .d_v = 32,
                 .causal = true, .first_query = 25, .biased = true, .modified = alibi});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 4, .queries = 17, .keys = 17, .d_k = 128, .d_v = 128,
                 .padded = true, .modified = alibi});
  all.push_back({.batch = 2, .heads = 2, .kv_heads = 1, .queries = 33, .keys = 33, .d_k = 32, .d_v = 32,
                 .padded = true, .empty = true, .modified = alibi});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 4, .queries = 128, .keys = 128, .d_k = 32, .d_v = 32,
                 .padded = true, .dropout = 0.2, .modified = soft_cap});
  all.push_back({.batch = 1, .heads = 2, .kv_heads = 2, .queries = 1000, .keys = 1000, .d_k = 64, .d_v = 64,
                 .causal = true, .modified = soft_cap});
  // ALiBi with fixed slopes: modified, nothing to learn (a GPU sums dQ with atomics, as unmodified).
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = 64, .d_v = 64,
                 .causal = true, .padded = true, .modified = alibi, .learns = false});
  // Restricted attention's band (key_band): the kernels walk only the tiles it reaches.
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 257, .keys = 257, .d_k = 64, .d_v = 64,
                 .padded = true, .band = attn::key_band{-20, 20}});
  all.push_back({.batch = 2, .heads = 2, .kv_heads = 1, .queries = 200, .keys = 200, .d_k = 32, .d_v = 32,
                 .causal = true, .band = attn::key_band{-70, 0}});  // a decoder's: the 70 keys before
  all.push_back({.batch = 1, .heads = 2, .kv_heads = 2, .queries = 70, .keys = 300, .d_k = 128, .d_v = 128,
                 .first_query = 150, .biased = true, .band = attn::key_band{-10, 3}});  // queries at 150 … 219
  all.push_back({.batch = 2, .heads = 2, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = 64, .d_v = 64,
                 .band = attn::key_band{100, 300}});  // queries from 29 on see no key
  all.push_back({.batch = 1, .heads = 2, .kv_heads = 2, .queries = 1000, .keys = 1000, .d_k = 64, .d_v = 64,
                 .band = attn::key_band{-64, 64}});
  // Bands given as expressions: the kernels ask each pair, over the tiles of the expression's spans.
  all.push_back({.batch = 2, .heads = 2, .kv_heads = 1, .queries = 200, .keys = 200, .d_k = 32, .d_v = 32,
                 .causal = true, .band = attn::key_band{-70, 0}, .band_as_expression = true});
  all.push_back({.batch = 1, .heads = 2, .kv_heads = 2, .queries = 70, .keys = 300, .d_k = 128, .d_v = 128,
                 .first_query = 150, .biased = true, .band = attn::key_band{-10, 3}, .band_as_expression = true});
  // The heads side by side in each row (fused_attention_in_rows): every kernel's addressing.
  for (index_t d : {32, 64, 128})
    all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = d, .d_v = d,
                   .causal = true, .padded = true, .heads_in_rows = true});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 4, .queries = 17, .keys = 17, .d_k = 64, .d_v = 64,
                 .heads_in_rows = true});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 1, .queries = 70, .keys = 95, .d_k = 64, .d_v = 32,
                 .causal = true, .first_query = 25, .biased = true, .heads_in_rows = true});
  all.push_back({.batch = 3, .heads = 2, .kv_heads = 2, .queries = 65, .keys = 67, .d_k = 40, .d_v = 24,
                 .padded = true, .biased = true, .heads_in_rows = true});
  all.push_back({.batch = 2, .heads = 2, .kv_heads = 2, .queries = 33, .keys = 40, .d_k = 33, .d_v = 20,
                 .heads_in_rows = true});  // odd widths: no 16-byte copies
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = 64, .d_v = 64,
                 .causal = true, .padded = true, .biased = true, .dropout = 0.2, .heads_in_rows = true});
  all.push_back({.batch = 2, .heads = 4, .kv_heads = 2, .queries = 129, .keys = 129, .d_k = 64, .d_v = 64,
                 .causal = true, .padded = true, .modified = modification::alibi, .heads_in_rows = true});
  // Short sentences in rows, several a block on tensor cores (fused_attention_tensor_cores::
  // block_sentences): groups of sentences whole and cut by the batch's end, the pairs across
  // sentences hidden; self- and cross-attention, every mask and modification.
  all.push_back({.batch = 11, .heads = 4, .kv_heads = 2, .queries = 10, .keys = 10, .d_k = 64, .d_v = 64,
                 .causal = true, .heads_in_rows = true, .ragged = true});  // a decoder's: 6 a block, then 5
  all.push_back({.batch = 7, .heads = 2, .kv_heads = 2, .queries = 9, .keys = 13, .d_k = 32, .d_v = 32,
                 .biased = true, .heads_in_rows = true, .ragged = true});  // a decoder's look at the source: 4, 3
  all.push_back({.batch = 5, .heads = 4, .kv_heads = 1, .queries = 1, .keys = 1, .d_k = 128, .d_v = 128,
                 .heads_in_rows = true});  // five sentences of one token in a block
  all.push_back({.batch = 9, .heads = 4, .kv_heads = 2, .queries = 17, .keys = 17, .d_k = 64, .d_v = 64,
                 .causal = true, .padded = true, .dropout = 0.2, .heads_in_rows = true});
  all.push_back({.batch = 5, .heads = 2, .kv_heads = 1, .queries = 8, .keys = 20, .d_k = 64, .d_v = 64,
                 .causal = true, .first_query = 12, .heads_in_rows = true});  // decoding-like shift
  all.push_back({.batch = 5, .heads = 2, .kv_heads = 2, .queries = 14, .keys = 14, .d_k = 33, .d_v = 20,
                 .heads_in_rows = true, .ragged = true});  // odd widths: no 16-byte copies
  all.push_back({.batch = 4, .heads = 2, .kv_heads = 1, .queries = 11, .keys = 11, .d_k = 32, .d_v = 32,
                 .padded = true, .empty = true, .heads_in_rows = true});  // a sentence with no keys
  all.push_back({.batch = 6, .heads = 4, .kv_heads = 4, .queries = 12, .keys = 12, .d_k = 64, .d_v = 64,
                 .causal = true, .modified = modification::alibi, .heads_in_rows = true, .ragged = true});
  all.push_back({.batch = 6, .heads = 2, .kv_heads = 2, .queries = 15, .keys = 15, .d_k = 32, .d_v = 32,
                 .band = attn::key_band{-3, 3}, .heads_in_rows = true});
  all.push_back({.batch = 7, .heads = 2, .kv_heads = 1, .queries = 20, .keys = 7, .d_k = 64, .d_v = 64,
                 .dropout = 0.2, .modified = modification::soft_cap, .heads_in_rows = true,
                 .ragged = true});  // called out of line; more queries than keys: 3, 3, 1
  all.push_back({.batch = 6, .heads = 4, .kv_heads = 2, .queries = 12, .keys = 12, .d_k = 32, .d_v = 32,
                 .causal = true, .modified = modification::alibi, .learns = false,
                 .heads_in_rows = true});  // fixed slopes: dQ summed by the dK/dV kernel, modified
  return all;
}

/// ‖got − want‖ / ‖want‖ (‖got − want‖ when want is zero); NaN gives infinity.
inline double relative(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// Runs case z for T on Device: the 16-bit types call the kernel alone, but for the modified
/// cases, which go through grad as the others do.
template <class T, class Device>
result run_one(const sizes& z, unsigned seed) {
  if constexpr (attn::is_float16_storage<T>) {
    if (z.modified == modification::none) return run_kernel<T, Device>(z, seed);
  }
  return run<T, Device>(z, seed);
}

/// Runs every case for T on Device; a result a case, in cases() order (empty for a case T does
/// not run).
template <class T, class Device>
std::vector<result> run_all() {
  std::vector<result> all;
  unsigned seed = 1;
  for (const auto& z : cases()) {
    all.push_back(runs<T>(z) ? run_one<T, Device>(z, seed) : result{});  // empty on both sides
    ++seed;
  }
  return all;
}

}  // namespace fused_case
