// ALiBi (Press et al., 2022): instead of positional encodings, head h's scores get the bias
// −m_h·|i − j|, with slopes m_h = 2^(−8h/H), h = 1 … H, fixed ("alibi") or learned from there
// ("alibi:learned", their gradients read off the expression like everything else's).
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "../../grad/cast.hpp"
#include "../variant.hpp"

namespace attn::nn {

template <class T, class C, class Device>
struct alibi {
  static constexpr std::string_view name = "alibi";
  using A = activation_t<T>;
  using P = parameter_t<T>;
  using heads = typename C::heads;
  grad::parameter<P, shape<heads>, Device> slopes{extents<shape<heads>>()};
  bool learned;
  attention_kind kind;

  alibi(random_stream&, attention_kind k, const variant_spec& spec) : learned(spec.argument == "learned"), kind(k) {
    if (!learned && !spec.argument.empty() && spec.argument != "fixed")
      throw std::invalid_argument("attention variant alibi takes 'fixed' or 'learned' (alibi:learned), not '" +
                                  spec.argument + "'");
    std::vector<P> m(static_cast<std::size_t>(heads::extent));
    for (std::size_t h = 0; h < m.size(); ++h) m[h] = P(std::exp2(-8.0 * double(h + 1) / double(heads::extent)));
    copy_from_host<Device>(slopes.value().data(), std::span<const P>(m));
  }

  /// Self-attention only: a query and a key of one sequence have comparable positions.
  bool applies() const { return kind != attention_kind::encoder_decoder; }

  auto modification_inputs(const context& ctx) const {
    if (learned) return std::tuple{grad::cast<A>(ctx.tape, slopes)};
    return std::tuple{grad::variable<A, shape<heads>, Device>(attn::cast<A>(slopes.value()))};  // a constant
  }

  template <class S, class M>
  auto modify(const S& s, index_t first_query, const M& m) const {
    return s - broadcast_like(m, s) * abs(query_index(s, first_query) - key_index(s));
  }

  void collect(grad::parameter_list<P, Device>& list) {
    if (learned) list.add("slopes", slopes);
  }
};

}  // namespace attn::nn
