// Compile-time lists of types: the algebra behind shapes (membership, position, removal, set difference).
#pragma once

#include <cstddef>
#include <type_traits>

namespace attn::meta {

template <class... Ts>
struct list {
  static constexpr std::size_t size = sizeof...(Ts);
};

/// True when T is one of Ts.
template <class T, class List>
inline constexpr bool contains = false;
template <class T, class... Ts>
inline constexpr bool contains<T, list<Ts...>> = (std::is_same_v<T, Ts> || ...);

/// Position of the first T in the list; the list's size when absent.
template <class T, class List>
struct index_of;
template <class T>
struct index_of<T, list<>> : std::integral_constant<std::size_t, 0> {};
template <class T, class Head, class... Tail>
struct index_of<T, list<Head, Tail...>>
    : std::integral_constant<std::size_t,
                             std::is_same_v<T, Head> ? 0 : 1 + index_of<T, list<Tail...>>::value> {};
template <class T, class List>
inline constexpr std::size_t index_of_v = index_of<T, List>::value;

/// Concatenation of lists.
template <class... Lists>
struct concat;
template <>
struct concat<> {
  using type = list<>;
};
template <class... Ts>
struct concat<list<Ts...>> {
  using type = list<Ts...>;
};
template <class... As, class... Bs, class... Rest>
struct concat<list<As...>, list<Bs...>, Rest...> : concat<list<As..., Bs...>, Rest...> {};
template <class... Lists>
using concat_t = typename concat<Lists...>::type;

/// The elements of A that are not in B, in A's order.
template <class A, class B>
struct difference;
template <class... As, class B>
struct difference<list<As...>, B> {
  using type = concat_t<std::conditional_t<contains<As, B>, list<>, list<As>>...>;
};
template <class A, class B>
using difference_t = typename difference<A, B>::type;

/// The elements of A that are also in B, in A's order.
template <class A, class B>
struct intersection;
template <class... As, class B>
struct intersection<list<As...>, B> {
  using type = concat_t<std::conditional_t<contains<As, B>, list<As>, list<>>...>;
};
template <class A, class B>
using intersection_t = typename intersection<A, B>::type;

/// The list with every T replaced by the elements of With.
template <class T, class With, class List>
struct replace;
template <class T, class With, class... Ts>
struct replace<T, With, list<Ts...>> {
  using type = concat_t<std::conditional_t<std::is_same_v<T, Ts>, With, list<Ts>>...>;
};
template <class T, class With, class List>
using replace_t = typename replace<T, With, List>::type;

/// The element at position I.
template <std::size_t I, class List>
struct at;
template <class Head, class... Tail>
struct at<0, list<Head, Tail...>> {
  using type = Head;
};
template <std::size_t I, class Head, class... Tail>
struct at<I, list<Head, Tail...>> : at<I - 1, list<Tail...>> {};
template <std::size_t I, class List>
using at_t = typename at<I, List>::type;

/// True when no element occurs twice.
template <class List>
inline constexpr bool unique = true;
template <class Head, class... Tail>
inline constexpr bool unique<list<Head, Tail...>> =
    !contains<Head, list<Tail...>> && unique<list<Tail...>>;

/// True when A and B hold the same elements, in any order (both without repeats).
template <class A, class B>
inline constexpr bool same_set =
    A::size == B::size && difference_t<A, B>::size == 0 && difference_t<B, A>::size == 0;

/// True when the elements of Sub occur in List in the same relative order.
template <class Sub, class List>
inline constexpr bool is_subsequence = false;
template <class List>
inline constexpr bool is_subsequence<list<>, List> = true;
template <class S, class... Ss>
inline constexpr bool is_subsequence<list<S, Ss...>, list<>> = false;
template <class S, class... Ss, class L, class... Ls>
inline constexpr bool is_subsequence<list<S, Ss...>, list<L, Ls...>> =
    std::is_same_v<S, L> ? is_subsequence<list<Ss...>, list<Ls...>>
                         : is_subsequence<list<S, Ss...>, list<Ls...>>;

}  // namespace attn::meta
