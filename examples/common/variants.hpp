// The attention variants attn-train and attn-translate offer (--attention NAME[:ARG]): one
// instantiation of each compiled model serves all of them, chosen at run time (nn::one_of),
// so that the programs' build grows by the variants' few operations, not by a model each.
// Multi-query and grouped-query attention change the parameters' shapes and would need a model
// of their own each; the programs leave them out (the library has them, nn/variants).
#pragma once

#include <attn/nn/variants.hpp>

#include "variant_names.hpp"

namespace attn::examples {

/// Configuration C whose attention is chosen at run time among the shipped variants.
template <class C>
struct with_variants : C {
  template <class T, class Config, class Device>
  using attention = nn::one_of<T, Config, Device, nn::scaled_dot_product, nn::dot_product, nn::additive,
                               nn::restricted, nn::alibi>;
};

}  // namespace attn::examples
