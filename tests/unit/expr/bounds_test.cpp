// Bounds of an expression over a box of coordinates (include/attn/expr/bounds.hpp) against every
// element of the box (element_at): they hold it, for arithmetic (rounded too), comparisons,
// "and" and "or" of bools, selects, broadcasts, a permute, a slice and a rename, over many
// boxes, and hold a fused multiply-add's value; they are known where the operations keep them,
// and decide comparisons where the box allows; unknown where they cannot be kept.
#include <doctest/doctest.h>

#include <attn/attn.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

namespace {

using namespace attn;
using B = dim<"batch">;
using Q = dim<"queries">;
using K = dim<"keys">;
using pairs = shape<B, Q, K>;

constexpr index_t positions = 40, keys = 50;
const extents<pairs> one_sentence(1, positions, keys);
const auto query = broadcast<pairs>(iota<float, Q>(positions), one_sentence);
const auto key = broadcast<pairs>(iota<float, K>(keys), one_sentence);

/// Over 300 random boxes, e's bounds against its every element there; how many boxes had
/// bounds, and (bool) how many of those decided the value.
struct tally {
  int known = 0, decided = 0;
};
template <class E>
tally check_bounds(const std::string& name, const E& e) {
  INFO(name);
  std::mt19937 generator(7);
  tally t;
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<index_t> position(0, positions - 1), key_index(0, keys - 1);
    index_t i0 = position(generator), i1 = position(generator), j0 = key_index(generator), j1 = key_index(generator);
    if (trial % 3 == 0) i1 = i0 + (i1 % 4), j1 = j0 + (j1 % 4);  // small boxes too, which decide more
    if (i1 >= positions) i1 = positions - 1;
    if (j1 >= keys) j1 = keys - 1;
    if (i0 > i1) std::swap(i0, i1);
    if (j0 > j1) std::swap(j0, j1);
    const auto b = bounds_over(e, {{0, i0, j0}, {0, i1, j1}});
    if (!b.known) continue;
    ++t.known;
    if constexpr (std::is_same_v<value_t<E>, bool>) t.decided += b.lo || !b.hi;
    int outside = 0;
    for (index_t i = i0; i <= i1; ++i)
      for (index_t j = j0; j <= j1; ++j) {
        const auto x = element_at(e, {0, i, j});
        if constexpr (std::is_same_v<value_t<E>, bool>) outside += (b.lo && !x) || (!b.hi && x);
        else outside += !(x >= b.lo && x <= b.hi);
      }
    CAPTURE(i0);
    CAPTURE(i1);
    CAPTURE(j0);
    CAPTURE(j1);
    CHECK(outside == 0);
  }
  return t;
}

TEST_CASE("bounds over a box hold every element of it") {
  // Numbers: every box has bounds.
  CHECK(check_bounds("i - j", query - key).known == 300);
  CHECK(check_bounds("|i - j| / 2 - 3", abs(query - key) * 0.5f - 3.0f).known == 300);
  CHECK(check_bounds("-(i · j) + max(i, 2j) - min(i, 30)", -(query * key) + max(query, key * 2.0f) - min(query, 30.0f))
            .known == 300);
  CHECK(check_bounds("(i - 20)(j - 25)", (query - 20.0f) * (key - 25.0f)).known == 300);
  CHECK(check_bounds("relu(i - 20) + sqrt(j)", relu(query - 20.0f) + sqrt(key)).known == 300);
  CHECK(check_bounds("where(i < 10, j, 2i)", where(query < 10.0f, key, query * 2.0f)).known == 300);
  CHECK(check_bounds("double(i - j)", cast<double>(query - key)).known == 300);
  // A permute and a slice: key j + 5 read through [batch, keys, queries].
  using transposed = shape<B, K, Q>;
  const auto shifted_keys = permute<B, Q, K>(slice<K>(
      broadcast<transposed>(iota<float, K>(keys + 5), extents<transposed>(1, keys + 5, positions)), 5, keys));
  CHECK(check_bounds("j + 5 through a permute and a slice", shifted_keys - query).known == 300);
  // Rounded arithmetic: inexact constants, values past float's integers' 2²⁴.
  CHECK(check_bounds("0.1i - 0.3j + 0.7", query * 0.1f - key * 0.3f + 0.7f).known == 300);
  CHECK(check_bounds("(i + 16777200) - j", (query + 16777200.0f) - key).known == 300);
  CHECK(check_bounds("-sqrt(i) · 1.1", -sqrt(query) * 1.1f).known == 300);
  // A rename: the same coordinates under other names.
  using renamed = shape<B, dim<"positions">, K>;
  CHECK(check_bounds("i renamed", rename<dim<"positions">, Q>(broadcast<renamed>(
                                      iota<float, dim<"positions">>(positions), extents<renamed>(1, positions, keys))) -
                                      key)
            .known == 300);
  // Comparisons: bounds always, decided where the box lies on one side.
  for (const auto& [name, t] :
       {std::pair{"|i - j| <= 5", check_bounds("|i - j| <= 5", abs(query - key) <= 5.0f)},
        std::pair{"min(j, |i - j| - 2) <= 0", check_bounds("min(j, |i - j| - 2) <= 0", min(key, abs(query - key) - 2.0f) <= 0.0f)},
        std::pair{"i == j", check_bounds("i == j", query == key)},
        std::pair{"i != j", check_bounds("i != j", query != key)},
        std::pair{"j > i", check_bounds("j > i", key > query)},
        std::pair{"j >= 2i", check_bounds("j >= 2i", key >= query * 2.0f)},
        std::pair{"i < j", check_bounds("i < j", query < key)},
        std::pair{"where(i < 8, j <= i, |i - j| <= 3)",
                  check_bounds("where", where(query < 8.0f, key <= query, abs(query - key) <= 3.0f))},
        std::pair{"max(j <= 2, |i - j| <= 3): an or", check_bounds("or", max(key <= 2.0f, abs(query - key) <= 3.0f))},
        std::pair{"min(j <= 20, |i - j| <= 3): an and", check_bounds("and", min(key <= 20.0f, abs(query - key) <= 3.0f))},
        std::pair{"0.1i - j <= 0", check_bounds("0.1i - j <= 0", query * 0.1f - key <= 0.0f)}}) {
    INFO(name);
    CHECK(t.known == 300);
    CHECK(t.decided > 30);
  }
}

TEST_CASE("a product's bounds hold the exact product: a fused multiply-add lands inside") {
  // 0.1f · 10 rounds to 1 exactly, but is 1 + 1.49e-8: fma(i, 0.1f, −j) at (10, 1) is not 0.
  int outside = 0, boxes = 0;
  for (index_t i0 = 0; i0 < positions; i0 += 3)
    for (index_t j0 = 0; j0 < keys; j0 += 4) {
      const index_t i1 = std::min(i0 + 5, positions - 1), j1 = std::min(j0 + 6, keys - 1);
      const auto b = bounds_over(query * 0.1f - key, {{0, i0, j0}, {0, i1, j1}});
      REQUIRE(b.known);
      ++boxes;
      for (index_t i = i0; i <= i1; ++i)
        for (index_t j = j0; j <= j1; ++j) {
          const float fused = std::fma(float(i), 0.1f, -float(j));
          outside += !(fused >= b.lo && fused <= b.hi);
        }
    }
  CHECK(boxes > 100);
  CHECK(outside == 0);
  const auto at_ten = bounds_over(query * 0.1f - key <= 0.0f, {{0, 10, 1}, {0, 10, 1}});
  CHECK(at_ten.known);
  CHECK_FALSE(at_ten.lo);  // not "true everywhere": the fused value is above 0
  CHECK(at_ten.hi);
}

TEST_CASE("bounds are unknown where the operations cannot keep them") {
  const coordinate_box<3> box{{0, 0, 0}, {0, 3, 3}};
  CHECK_FALSE(bounds_over(exp(query) <= 3.0f, box).known);  // exp: not kept
  CHECK_FALSE(bounds_over(query / 2.0f, box).known);         // a division
  CHECK_FALSE(bounds_over(query + std::numeric_limits<float>::infinity(), box).known);
  const tensor<float, pairs> allowed(1, positions, keys);
  CHECK_FALSE(bounds_over(key <= allowed, box).known);  // memory
  CHECK_FALSE(bounds_over(placeholder<float>(one_sentence) <= key, box).known);
  using merged = dim<"pairs">;
  CHECK_FALSE(bounds_over(merge<Q, K, merged>(query), coordinate_box<2>{{0, 0}, {0, 3}}).known);  // a merge
  CHECK_FALSE(bounds_over(sqrt(query - 2.0f), box).known);                                        // sqrt below 0
  // Integers wrap: j − i in unsigned arithmetic is no interval.
  const auto unsigned_key = broadcast<pairs>(iota<unsigned, K>(keys), one_sentence);
  const auto unsigned_query = broadcast<pairs>(iota<unsigned, Q>(positions), one_sentence);
  CHECK_FALSE(bounds_over(unsigned_key - unsigned_query <= 3u, {{0, 5, 0}, {0, 5, 10}}).known);
  // A select whose condition the box leaves open: both branches' bounds.
  const auto either = bounds_over(where(query < 2.0f, key, -key), box);
  CHECK(either.known);
  CHECK(either.lo == -3.0f);
  CHECK(either.hi == 3.0f);
  // On a single element: the element itself, a product's a unit in the last place wider.
  const auto one = bounds_over(abs(query - key) + 0.5f, {{0, 7, 3}, {0, 7, 3}});
  CHECK(one.known);
  CHECK(one.lo == 4.5f);
  CHECK(one.hi == 4.5f);
  const auto product = bounds_over(abs(query - key) * 0.5f, {{0, 7, 3}, {0, 7, 3}});
  CHECK(product.lo == std::nextafter(2.0f, 0.0f));
  CHECK(product.hi == std::nextafter(2.0f, 3.0f));
}

}  // namespace
