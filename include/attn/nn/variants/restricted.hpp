// Restricted self-attention (§4, Table 1's last row): a query sees only the keys in a
// neighbourhood of size r centred on its position, |i − j| ≤ ⌊r/2⌋ (r keys when r is odd). A
// mask rule, so the decoder's causal mask composes with it (keys i − ⌊r/2⌋ … i there). The
// fused kernels take it as a band of keys and walk only the tiles it reaches: O(r·n) time and
// O(n) memory, where the unfused path builds an [n, n] mask.
#pragma once

#include "../variant.hpp"

namespace attn::nn {

template <class T, class C, class Device>
struct restricted {
  static constexpr std::string_view name = "restricted";
  index_t r;
  attention_kind kind;

  restricted(random_stream&, attention_kind k, const variant_spec& spec) : r(spec.positive_argument(name)), kind(k) {}

  /// Self-attention only: a query and a key of one sequence have comparable positions.
  bool applies() const { return kind != attention_kind::encoder_decoder; }

  template <class I, class J>
  auto allowed(const I& query, const J& key) const {
    return abs(query - key) <= value_t<I>(r / 2);
  }

  /// The same rule for the fused kernels, whose query i sits at first_query + i: keys
  /// first_query + i − ⌊r/2⌋ … first_query + i + ⌊r/2⌋, a band whose tiles alone they walk.
  key_band kernel_rule(index_t first_query) const { return {first_query - r / 2, first_query + r / 2}; }
};

}  // namespace attn::nn
