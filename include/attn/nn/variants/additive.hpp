// Additive attention (Bahdanau et al., 2015), which §3.2.1 compares dot-product attention with:
// score(q, k) = vᵀ tanh(q + k) for each head, q and k already projected by W^Q and W^K. It
// builds a [batch, heads, queries, keys, d_k] tensor, so its memory grows as n²·d_k.
#pragma once

#include "../../grad/cast.hpp"
#include "../../grad/elementwise.hpp"
#include "../init.hpp"
#include "../variant.hpp"

namespace attn::nn {

template <class T, class C, class Device>
struct additive {
  static constexpr std::string_view name = "additive";
  using A = activation_t<T>;
  grad::parameter<parameter_t<T>, shape<typename C::heads, typename C::d_k>, Device> v;  // one v a head

  additive(random_stream& init, attention_kind, const variant_spec&) { xavier_uniform(v, C::d_k::extent, 1, init); }

  template <class U>
  static U scale(index_t) {
    return U(1);  // tanh bounds the terms; no growth with d_k to counteract
  }

  template <class B, class H, class Q, class DK>
  grad::variable<A, shape<B, H, Q, keys>, Device> score(const context& ctx,
                                                        const grad::variable<A, shape<B, H, Q, DK>, Device>& q,
                                                        const grad::variable<A, shape<B, H, keys, DK>, Device>& k) const {
    using S = shape<B, H, Q, keys, DK>;
    const extents<S> at(q.extents().template extent<B>(), q.extents().template extent<Q>(),
                        k.extents().template extent<keys>());
    auto terms = grad::map(
        ctx.tape,
        [at](const auto& qs, const auto& ks, const auto& vs) {
          return broadcast<S>(vs, at) * tanh(broadcast<S>(qs, at) + broadcast<S>(ks, at));
        },
        q, k, grad::cast<A>(ctx.tape, v));
    return grad::sum<DK>(ctx.tape, terms);
  }

  void collect(grad::parameter_list<parameter_t<T>, Device>& list) { list.add("v", v); }
};

}  // namespace attn::nn
