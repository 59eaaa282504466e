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

/// Token ids [batch, L] from a list, row by row.
template <class L>
tensor<nn::token, shape<nn::batch, L>> tokens(index_t sentences, index_t length, std::initializer_list<int> ids) {
  tensor<nn::token, shape<nn::batch, L>> t(sentences, length);
  index_t i = 0;
  for (int id : ids) t.data()[i++] = id;
  return t;
}

}  // namespace attn::test
