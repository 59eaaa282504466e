// Small configurations for tests: every width distinct, h·d_k ≠ d_model ≠ h·d_v.
#pragma once

#include <attn/nn.hpp>

namespace attn::test {

struct micro : nn::config<nn::widths<8, 12, 2, 3, 5>, 2> {
  static constexpr double dropout = 0.0;
};
struct micro_pre_norm : micro {
  static constexpr nn::norm_placement norm = nn::norm_placement::pre;
};
struct micro_learned_untied : micro {
  static constexpr nn::positional positions = nn::positional::learned;
  static constexpr index_t max_positions = 12;
  static constexpr bool tied_embeddings = false;
};

// The micro model with each attention variant (nn/variants.hpp).
struct micro_unscaled : micro {
  template <class T, class C, class D>
  using attention = nn::dot_product<T, C, D>;
};
struct micro_additive : micro {
  template <class T, class C, class D>
  using attention = nn::additive<T, C, D>;
};
struct micro_restricted : micro {
  template <class T, class C, class D>
  using attention = nn::restricted<T, C, D>;
  static constexpr std::string_view attention_spec = "restricted:3";
};
struct micro_mqa : micro {
  template <class T, class C, class D>
  using attention = nn::multi_query<T, C, D>;
};
struct micro_alibi : micro {  // learned slopes, no positional encoding
  template <class T, class C, class D>
  using attention = nn::alibi<T, C, D>;
  static constexpr std::string_view attention_spec = "alibi:learned";
  static constexpr nn::positional positions = nn::positional::none;
};

/// Token ids [batch, L] from a list, row by row.
template <class L>
tensor<nn::token, shape<nn::batch, L>> tokens(index_t sentences, index_t length, std::initializer_list<int> ids) {
  tensor<nn::token, shape<nn::batch, L>> t(sentences, length);
  index_t i = 0;
  for (int id : ids) t.data()[i++] = id;
  return t;
}

}  // namespace attn::test
