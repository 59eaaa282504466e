// The element types of a model: the activations', which the forward and backward passes
// compute in, and the parameters', which the optimizer updates and checkpoints keep. One type
// by default; mixed precision keeps the parameters wider than the activations ("master
// weights", Micikevicius et al., 2018) and converts them where an operation reads them.
#pragma once

#include "../core/tensor.hpp"

namespace attn::nn {

/// `transformer<precision<float, double>, C>` computes in float and keeps double parameters;
/// `transformer<float, C>` is `transformer<precision<float, float>, C>`.
template <element Activation, element Parameter = Activation>
struct precision {
  using activation = Activation;
  using parameter = Parameter;
};

namespace detail {
template <class T>
struct precision_of {
  using type = precision<T>;
};
template <class Activation, class Parameter>
struct precision_of<precision<Activation, Parameter>> {
  using type = precision<Activation, Parameter>;
};
}  // namespace detail

/// The activations' element type of a model's T (an element type or a precision).
template <class T>
using activation_t = typename detail::precision_of<T>::type::activation;
/// The parameters' element type of a model's T.
template <class T>
using parameter_t = typename detail::precision_of<T>::type::parameter;

}  // namespace attn::nn
