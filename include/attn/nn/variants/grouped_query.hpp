// Grouped-query attention (Ainslie et al., 2023): G key/value heads, each shared by h/G query
// heads; G = 1 is multi-query attention (Shazeer, 2019). W^K and W^V shrink to G·d_k and G·d_v
// columns, and the decoder's key/value cache by h/G. Scores are Inner's, the paper's by default.
#pragma once

#include "../variant.hpp"

namespace attn::nn {

template <class T, class C, class Device, index_t KVHeads, template <class, class, class> class Inner = scaled_dot_product>
struct grouped_query : Inner<T, C, Device> {
  using base = Inner<T, C, Device>;
  using base::base;
  static constexpr std::string_view name = KVHeads == 1 ? "mqa" : "gqa";
  using kv_heads = dim<"kv_heads", KVHeads>;
};

template <class T, class C, class Device>
using multi_query = grouped_query<T, C, Device, 1>;

}  // namespace attn::nn
