// Fused attention: softmax(scale · Q·Kᵀ + masks) · V (paper eq. (1)) computed a tile of queries
// against a tile of keys at a time with an online softmax (Milakov & Gimelshein, 2018; Dao et al.,
// FlashAttention, 2022), so that the [queries, keys] scores never exist whole: memory grows with
// n, not n². The forward keeps each query row's log-sum-exp; the backward recomputes a tile's
// probabilities from it. Declared here once; each backend specialises `fused_attention<Device>`
// (cpu/fused_attention.hpp), as it does `primitives`.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "config.hpp"
#include "device.hpp"
#include "random.hpp"

namespace attn {

/// Where a head's rows lie in q, k, v or out (or their gradients): row i of head h of sentence b
/// starts at element start + i · stride.
struct head_rows {
  index_t start, stride;
};

/// How far apart, in elements, a tensor's sentences, the heads of a sentence and the rows of a
/// head are.
struct head_layout {
  index_t sentence = 0, head = 0, row = 0;

  ATTN_HOST_DEVICE head_rows of(index_t b, index_t h) const { return {b * sentence + h * head, row}; }
  /// `heads` heads of `length` rows `width` wide: [batch, heads, length, width], or, in_rows,
  /// [batch, length, heads, width].
  static head_layout of_heads(index_t heads, index_t length, index_t width, bool in_rows) {
    return in_rows ? head_layout{length * heads * width, width, heads * width}
                   : head_layout{heads * length * width, length * width, width};
  }
};

/// The sizes and masks of one fused attention call. Tensors are row-major in Device memory:
///   q [batch, heads, queries, d_k]      k [batch, kv_heads, keys, d_k]    v [batch, kv_heads, keys, d_v]
///   out [batch, heads, queries, d_v]    log_sum_exp [batch, heads, queries]
/// or, with heads_in_rows, q, k, v and out (and their gradients) as [batch, length, heads, d]:
/// the model's [batch, length, heads · d] as its projections make it and its output projection
/// reads it (paper §3.2.2's Concat), so that nothing permutes the heads around the kernels.
/// log_sum_exp is [batch, heads, queries] either way.
/// Query head h reads key/value head h / (heads / kv_heads) (grouped-query attention). Query i
/// sits at position first_query + i (incremental decoding); key j of sentence b is visible to it
/// when j < key_lengths[b] (padding at the end; null: every key), j ≤ first_query + i when
/// causal, and rule(first_query + i, j) (a variant's mask rule).
/// With dropout > 0, weight (b, h, i, j) is kept, times 1 / (1 − dropout), when
/// dropout_stream.uniform(dropout_start + ((b·heads + h)·queries + i)·keys + j) ≥ dropout: the
/// mask grad::dropout draws for the [batch, heads, queries, keys] weights from the same numbers.
struct fused_attention_problem {
  index_t batch = 1, heads = 1, kv_heads = 1, queries = 0, keys = 0, d_k = 0, d_v = 0;
  double scale = 1;
  const index_t* key_lengths = nullptr;  // [batch], Device memory
  bool causal = false;
  index_t first_query = 0;
  double dropout = 0;  // on the attention weights (not the paper's: §5.4 drops sublayer outputs)
  random_stream dropout_stream{};
  std::uint64_t dropout_start = 0;
  // The backward's dQ without atomics: the same bits every run, at the cost of a second kernel
  // on a GPU's tensor cores (fused_attention_launch.cuh). The CPU's is deterministic either way.
  bool deterministic = false;
  bool heads_in_rows = false;
  // The layouts of q (and dQ), out (and dO), k (and dK) and v (and dV), from the sizes and
  // heads_in_rows: set by laid_out(), which every kernel's entry point calls, so that a GPU
  // kernel reads its strides as it reads the sizes, from its parameters.
  head_layout q_layout{}, out_layout{}, k_layout{}, v_layout{};

  /// This problem with its layouts set.
  fused_attention_problem laid_out() const {
    fused_attention_problem p = *this;
    p.q_layout = head_layout::of_heads(heads, queries, d_k, heads_in_rows);
    p.out_layout = head_layout::of_heads(heads, queries, d_v, heads_in_rows);
    p.k_layout = head_layout::of_heads(kv_heads, keys, d_k, heads_in_rows);
    p.v_layout = head_layout::of_heads(kv_heads, keys, d_v, heads_in_rows);
    return p;
  }
  /// Head h's rows of sentence b in q, out, k or v, after laid_out(): h counts the query heads in
  /// q and out, the key/value heads in k and v.
  ATTN_HOST_DEVICE head_rows q_rows(index_t b, index_t h) const { return q_layout.of(b, h); }
  ATTN_HOST_DEVICE head_rows out_rows(index_t b, index_t h) const { return out_layout.of(b, h); }
  ATTN_HOST_DEVICE head_rows k_rows(index_t b, index_t h) const { return k_layout.of(b, h); }
  ATTN_HOST_DEVICE head_rows v_rows(index_t b, index_t h) const { return v_layout.of(b, h); }
  /// Where row r of log_sum_exp's [batch · heads · queries] starts in out (and dO).
  ATTN_HOST_DEVICE index_t out_row_start(index_t r) const {
    if (!heads_in_rows) return r * d_v;
    const index_t b = r / (heads * queries), h = r / queries % heads;
    return out_rows(b, h).start + r % queries * out_layout.row;
  }

  /// The factor weight (b, h, i, j) is multiplied by: 0 or 1 / (1 − dropout).
  ATTN_HOST_DEVICE double kept(index_t b, index_t h, index_t i, index_t j) const {
    return kept_of(dropout_stream, dropout_start, dropout, heads, queries, keys, b, h, i, j);
  }
  /// kept() from the members it reads, as values (a GPU kernel's out-of-line call).
  ATTN_HOST_DEVICE static double kept_of(const random_stream& stream, std::uint64_t start, double dropout,
                                         index_t heads, index_t queries, index_t keys, index_t b, index_t h,
                                         index_t i, index_t j) {
    const auto n = static_cast<std::uint64_t>(((b * heads + h) * queries + i) * keys + j);
    return stream.uniform(start + n) >= dropout ? 1.0 / (1.0 - dropout) : 0.0;
  }
};

/// Throws std::invalid_argument, naming `who`, for a problem no kernel takes: a query before
/// position 0 (the kernels' spans count positions from there).
inline void check_problem(const fused_attention_problem& p, const char* who) {
  if (p.first_query < 0)
    throw std::invalid_argument(std::string(who) + ": the first query's position is " + std::to_string(p.first_query) +
                                "; positions count from 0");
}

/// A bias at or below this hides its key as the masks' −∞ does (§3.2.3): the kernel skips a tile
/// whose pairs are all hidden, and a row with no visible key gets 0 (nn's `masked` is −1e9).
inline constexpr double hidden_bias = -1e8;

/// The mask rule that allows every pair.
struct every_pair {
  ATTN_HOST_DEVICE constexpr bool operator()(index_t /*query*/, index_t /*key*/) const { return true; }
  ATTN_HOST_DEVICE constexpr bool allows_every(index_t, index_t, index_t, index_t) const { return true; }
};

/// The end of a span with no end.
inline constexpr index_t max_index = std::numeric_limits<index_t>::max();

/// Indices [begin, end).
struct index_span {
  index_t begin, end;
};

/// Restricted attention's rule (§4) in the kernels' form: the query at position i sees keys
/// i + first … i + last (|i − j| ≤ ⌊r/2⌋ is {−⌊r/2⌋, ⌊r/2⌋}). Its spans tell the kernels which
/// tiles can hold a visible pair, so that they walk only those: O(r·n·d) products, not O(n²·d).
/// A rule of one's own may provide the same three members (spans that contain every allowed
/// pair; allows_every true only where every pair is allowed); a rule without them is asked pair
/// by pair, over every tile the other masks leave. (The spans add the offsets to indices: keep
/// them within ±2⁶²; every_pair, not a band of huge offsets, allows every pair.)
struct key_band {
  index_t first = 0, last = 0;

  ATTN_HOST_DEVICE constexpr bool operator()(index_t query, index_t key) const {
    return key - query >= first && key - query <= last;
  }
  /// The keys that some query at positions first_position … last_position may see.
  ATTN_HOST_DEVICE constexpr index_span keys_seen(index_t first_position, index_t last_position) const {
    return {first_position + first, last_position + last + 1};
  }
  /// The positions of the queries that may see some key of first_key … last_key.
  ATTN_HOST_DEVICE constexpr index_span positions_seeing(index_t first_key, index_t last_key) const {
    return {first_key - last, last_key - first + 1};
  }
  /// Whether every position of first_position … last_position sees every key of first_key … last_key.
  ATTN_HOST_DEVICE constexpr bool allows_every(index_t first_position, index_t last_position, index_t first_key,
                                               index_t last_key) const {
    return first_key - last_position >= first && last_key - first_position <= last;
  }
};

/// What the kernels ask of a rule about a tile, answered for any rule: the keys positions
/// first_position … last_position may see (all of them when the rule cannot say) …
template <class Rule>
ATTN_HOST_DEVICE constexpr index_span rule_keys_seen(const Rule& rule, index_t first_position, index_t last_position) {
  if constexpr (requires { rule.keys_seen(first_position, last_position); })
    return rule.keys_seen(first_position, last_position);
  else
    return {0, max_index};
}
/// … the positions that may see keys first_key … last_key …
template <class Rule>
ATTN_HOST_DEVICE constexpr index_span rule_positions_seeing(const Rule& rule, index_t first_key, index_t last_key) {
  if constexpr (requires { rule.positions_seeing(first_key, last_key); })
    return rule.positions_seeing(first_key, last_key);
  else
    return {0, max_index};
}
/// … and whether it allows every pair of the tile (then the kernels skip the rule's checks).
template <class Rule>
ATTN_HOST_DEVICE constexpr bool rule_allows_every(const Rule& rule, index_t first_position, index_t last_position,
                                                  index_t first_key, index_t last_key) {
  if constexpr (requires { rule.allows_every(first_position, last_position, first_key, last_key); })
    return rule.allows_every(first_position, last_position, first_key, last_key);
  else
    return false;
}

/// What the kernels ask of a rule (key_band's members), for a rule over `positions` positions
/// and `keys` keys that can bound itself over a block of pairs: Rule::bounds(first_position,
/// last_position, first_key, last_key) gives `known`, `lo` (allowed on every pair) and `hi`
/// (allowed on some), as expr/bounds.hpp's value_bounds<bool>. A span runs from the first block
/// of `block` indices the bounds do not hide to the end of the last; grad::pair_rule's bounds
/// are its expression's, the GPU's form's its plan's (cuda/attn/cuda/mask_rule.cuh).
template <class Rule>
struct spans_from_bounds {
  static constexpr index_t block = 64;
  index_t positions = 0, keys = 0;

  /// The keys that some position of first_position … last_position may see.
  ATTN_HOST_DEVICE index_span keys_seen(index_t first_position, index_t last_position) const {
    return not_hidden([&](index_t first, index_t last) { return hides(first_position, last_position, first, last); },
                      keys);
  }
  /// The positions that may see some key of first_key … last_key.
  ATTN_HOST_DEVICE index_span positions_seeing(index_t first_key, index_t last_key) const {
    return not_hidden([&](index_t first, index_t last) { return hides(first, last, first_key, last_key); },
                      positions);
  }
  /// Whether every pair of the block is allowed.
  ATTN_HOST_DEVICE bool allows_every(index_t first_position, index_t last_position, index_t first_key,
                                     index_t last_key) const {
    const auto b = rule().bounds(first_position, last_position, first_key, last_key);
    return b.known && b.lo;
  }

 private:
  ATTN_HOST_DEVICE const Rule& rule() const { return static_cast<const Rule&>(*this); }
  ATTN_HOST_DEVICE bool hides(index_t first_position, index_t last_position, index_t first_key,
                              index_t last_key) const {
    const auto b = rule().bounds(first_position, last_position, first_key, last_key);
    return b.known && !b.hi;
  }
  /// [begin, end) of [0, count) from the first block `hidden` does not rule out to the end of
  /// the last; empty ({count, count}) when it rules out every block.
  template <class Hidden>
  ATTN_HOST_DEVICE static index_span not_hidden(const Hidden& hidden, index_t count) {
    index_t begin = 0;
    while (begin < count && hidden(begin, (begin + block < count ? begin + block : count) - 1)) begin += block;
    if (begin >= count) return {count, count};
    index_t end = count;
    for (index_t last_block = (count - 1) / block * block; last_block > begin && hidden(last_block, end - 1);
         last_block -= block)
      end = last_block;
    return {begin, end};
  }
};

/// The score modification that changes nothing: the score is scale · q·k.
struct unmodified {};

/// Fused attention on a device; `available` says whether the device has it (nn falls back to
/// the unfused path where it does not), `widest_head` the widest d_k and d_v it takes,
/// `automatic_from_keys` and `automatic_from_queries` from how many keys and queries nn's
/// automatic choice takes it (below either the unfused path is as fast or faster: a decoding
/// step's few queries make no [queries, keys] tensor worth saving),
/// `automatic_modified_from_keys` the same for a variant whose scores it modifies,
/// `fast_for<T>(head_width)` whether it computes elements T in heads that wide on its fast road
/// on this device (the automatic choice takes it only there), and `modifies_scores` whether it
/// takes a score modification. The members every backend provides (T float, double,
/// bfloat16 or float16, the 16-bit ones computed in float with log_sum_exp in accumulate_t<T>;
/// Rule a copyable callable (index_t query position, index_t key) → bool (every_pair, key_band,
/// or one's own: key_band says what else a rule may tell the kernels); bias null or an additive mask
/// [batch, queries, keys] shared by the heads, as the unfused path's, hiding keys at or below
/// `hidden_bias`):
///
///   forward(problem, q, k, v, bias, out, log_sum_exp, rule)
///       out = softmax over the visible keys of scale · q·kᵀ + bias, times v; log_sum_exp its
///       rows' log Σ exp(scale · q·kᵀ + bias). A row with no visible key gets out 0 and
///       log_sum_exp −∞ (the unfused path, which adds a finite `masked` to hidden scores,
///       averages every value there).
///   backward(problem, q, k, v, bias, out, d_out, log_sum_exp, d_q, d_k, d_v, rule)
///       the gradients of Σ d_out ⊙ out with respect to q, k and v, overwritten; the same bits
///       every run when problem.deterministic (a backend may otherwise add dQ with atomics, as
///       the GPU's tensor-core kernels do; the CPU's is deterministic either way).
/// Both take a score modification last (a variant's, evaluated a score at a time; `unmodified`
/// by default): the score of query i and key j in head h of sentence b becomes
/// modification(c, scale · q·k) + bias, c = {b, h, i, j} (i the query's index, not its
/// position). It provides derivative(c, s), the derivative of the modified score by s, and
/// gradient_size(): how many numbers its learned inputs' gradients take, which backward then
/// overwrites at its last argument, d_modification, calling accumulate(c, s, d_score, gradients)
/// to add d_score · ∂modification/∂input there, a score at a time.
template <class Device>
struct fused_attention {
  static constexpr bool available = false;
  static constexpr index_t widest_head = 0;
  static constexpr index_t automatic_from_keys = 0;
  static constexpr index_t automatic_from_queries = 0;
  static constexpr index_t automatic_modified_from_keys = 0;
  template <class T>
  static bool fast_for(index_t /*head_width*/) {
    return false;
  }
  static constexpr bool modifies_scores = false;  // whether it evaluates a score modification
};

}  // namespace attn
