// A variant chosen at run time by name among Variants, so that one instantiation of the model
// serves them all (attn-train --attention NAME[:ARG]). The alternatives must agree on the
// number of key/value heads, which is part of the parameters' shapes.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "../variant.hpp"

namespace attn::nn {

template <class T, class C, class Device, template <class, class, class> class... Variants>
struct one_of {
  using alternatives = std::variant<Variants<T, C, Device>...>;
  using kv_heads = kv_heads_of<std::variant_alternative_t<0, alternatives>, C>;
  static_assert((std::is_same_v<kv_heads, kv_heads_of<Variants<T, C, Device>, C>> && ...),
                "attn::nn::one_of: the alternatives must have the same number of key/value heads");

  alternatives chosen;

  /// The alternative `spec` names; the first when it names none.
  one_of(random_stream& init, attention_kind kind, const variant_spec& spec) : chosen(pick<0>(init, kind, spec)) {}

  std::string_view name() const {
    return std::visit([](const auto& v) { return std::string_view(v.name); }, chosen);
  }
  static std::string names() {
    std::string all;
    ((all += (all.empty() ? "" : ", ") + std::string(Variants<T, C, Device>::name)), ...);
    return all;
  }

  /// f(the chosen variant): how a module asks what the chosen one does (multi_head_attention's
  /// heads in rows).
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), chosen);
  }

  template <class Q, class K, class V, class M>
  auto attend(const context& ctx, const Q& q, const K& k, const V& v, const M& mask, attention_kind kind,
              index_t first_query, double weight_dropout) const {
    return std::visit(
        [&](const auto& variant) {
          return variant_attention(variant, ctx, q, k, v, mask, kind, first_query, weight_dropout);
        },
        chosen);
  }

  template <class List>
  void collect(List& list) {
    std::visit(
        [&](auto& variant) {
          if constexpr (requires { variant.collect(list); }) variant.collect(list);
        },
        chosen);
  }

 private:
  template <std::size_t I>
  static alternatives pick(random_stream& init, attention_kind kind, const variant_spec& spec) {
    if constexpr (I == sizeof...(Variants)) {
      throw std::invalid_argument("unknown attention variant '" + spec.name + "'; this program knows " + names());
    } else {
      using V = std::variant_alternative_t<I, alternatives>;
      if ((I == 0 && spec.name.empty()) || spec.name == V::name)
        return alternatives(std::in_place_index<I>, make_variant<V>(init, kind, spec));
      return pick<I + 1>(init, kind, spec);
    }
  }
};

}  // namespace attn::nn
