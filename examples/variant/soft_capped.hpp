// An attention variant written outside the library, as a user would (docs/variants.md): scores
// soft-capped by c·tanh(s / c), as in Gemma 2, with c a learned scalar a head. The unit tests
// check its gradients and train a model with it; bench_attention times it beside the shipped ones.
#pragma once

#include <attn/nn.hpp>

template <class T, class C, class Device>
struct soft_capped {
  static constexpr std::string_view name = "soft-capped";
  attn::grad::parameter<attn::nn::parameter_t<T>, attn::shape<typename C::heads>, Device> cap{{}};

  soft_capped(attn::random_stream&, attn::nn::attention_kind, const attn::nn::variant_spec&) {
    attn::nn::constant(cap, attn::nn::parameter_t<T>(5));
  }
  auto modification_inputs(const attn::nn::context& ctx) const {
    return std::tuple{attn::grad::cast<attn::nn::activation_t<T>>(ctx.tape, cap)};
  }
  template <class S, class Cap>
  auto modify(const S& s, attn::index_t /*first_query*/, const Cap& c) const {
    return broadcast_like(c, s) * tanh(s / broadcast_like(c, s));
  }
  void collect(attn::grad::parameter_list<attn::nn::parameter_t<T>, Device>& list) { list.add("cap", cap); }
};
