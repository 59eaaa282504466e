// A mask rule's device form (cuda/attn/cuda/mask_rule.cuh: a pair_rule's expression as a
// coordinate plan) against its host form (grad/fused_attention.hpp's pair_rule: element_at), at
// every pair of 150 query positions and 200 keys, for rules as nn's variants write them; and its
// spans and whole-tile answers (the plan's bounds, plan_bounds.cuh) against the host's (the
// expression's, expr/bounds.hpp) over many blocks. The plans are built from host expressions and
// run on the CPU (the device code compiled for the emulator); the fused kernels ask them on the
// emulator (fused_attention_emulated_test.cpp) and on a GPU (tests/gpu/fused_attention_test.cu).
#include <attn/cuda/emulator.hpp>  // first: the device code below is compiled for it

#include <attn/cuda/mask_rule.cuh>
#include <attn/grad/fused_attention.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <type_traits>

namespace {

using namespace attn;

using B = dim<"batch">;
using Q = dim<"queries">;
using K = dim<"keys">;

constexpr index_t positions = 150, keys = 200;  // beyond a block of 64 (pair_rule::block)

/// Both forms of allowed(query, key) and a plain predicate, at every pair.
template <class F, class Plain>
void compare(const std::string& name, const F& allowed, const Plain& plain) {
  const grad::pair_rule on_host{grad::over_pairs<float, B, Q, K>(allowed, positions, keys)};
  const auto on_device = cuda_backend::device_rule(on_host);
  static_assert(std::is_trivially_copyable_v<decltype(on_device)>);
  index_t wrong_on_host = 0, wrong_on_device = 0, allowed_pairs = 0;
  for (index_t i = 0; i < positions; ++i)
    for (index_t j = 0; j < keys; ++j) {
      wrong_on_host += on_host(i, j) != plain(i, j);
      wrong_on_device += on_device(i, j) != plain(i, j);
      allowed_pairs += plain(i, j);
    }
  INFO(name);
  CHECK(wrong_on_host == 0);
  CHECK(wrong_on_device == 0);
  CHECK(allowed_pairs > 0);  // a rule that hides some pairs, not all
  CHECK(allowed_pairs < positions * keys);
  // Spans and whole blocks: the same answers from the plan's bounds as from the expression's.
  int different = 0, narrower = 0, whole = 0;
  for (index_t first = 0; first < keys; first += 3)
    for (const index_t size : {1, 4, 9, 30, 64, 100}) {
      const index_t last_position = std::min(first + size, positions) - 1, last_key = std::min(first + size, keys) - 1;
      const auto same = [](index_span a, index_span b) { return a.begin == b.begin && a.end == b.end; };
      if (first < positions) {
        different += !same(on_host.keys_seen(first, last_position), on_device.keys_seen(first, last_position));
        narrower += on_host.keys_seen(first, last_position).end - on_host.keys_seen(first, last_position).begin < keys;
      }
      different += !same(on_host.positions_seeing(first, last_key), on_device.positions_seeing(first, last_key));
      for (index_t j = 0; j + size <= keys; j += 7)
        if (first < positions) {
          const bool every = on_host.allows_every(first, last_position, j, j + size - 1);
          different += every != on_device.allows_every(first, last_position, j, j + size - 1);
          whole += every;
        }
    }
  CHECK(different == 0);
  CHECK(narrower > 0);  // the spans leave some keys out
  CHECK(whole > 0);     // and the bounds allow some blocks whole
}

TEST_CASE("a mask rule's plan allows the pairs its expression allows") {
  // |j − i − 2.5| ≤ 6.5: restricted attention's band, shifted (keys i − 4 … i + 9).
  compare(
      "band", [](const auto& query, const auto& key) { return abs(key - query - 2.5f) <= 6.5f; },
      [](index_t i, index_t j) { return j - i >= -4 && j - i <= 9; });
  // A window with one global key, the first: no band.
  compare(
      "window and first key",
      [](const auto& query, const auto& key) { return min(key, abs(query - key) - 2.0f) <= 0.0f; },
      [](index_t i, index_t j) { return j == 0 || (i - j <= 2 && j - i <= 2); });
  // The first three keys, or a window: an "or" of two bools (their max).
  compare(
      "or", [](const auto& query, const auto& key) { return max(key <= 2.0f, abs(query - key) <= 3.0f); },
      [](index_t i, index_t j) { return j <= 2 || (i - j <= 3 && j - i <= 3); });
  // Causal for the first 8 positions, a window after them.
  compare(
      "where",
      [](const auto& query, const auto& key) { return where(query < 8.0f, key <= query, abs(query - key) <= 3.0f); },
      [](index_t i, index_t j) { return i < 8 ? j <= i : i - j <= 3 && j - i <= 3; });
}

TEST_CASE("a mask rule's plan through a permute and a slice") {
  // Key j read as j + 5 − 5 through [batch, keys, queries], a slice and a permute.
  compare(
      "permute and slice",
      [](const auto& query, const auto&) {
        using transposed = shape<B, K, Q>;
        const auto shifted_keys = permute<B, Q, K>(
            slice<K>(broadcast<transposed>(iota<float, K>(keys + 5), extents<transposed>(1, keys + 5, positions)), 5, keys));
        return abs(shifted_keys - 5.0f - query) <= 4.0f;
      },
      [](index_t i, index_t j) { return i - j <= 4 && j - i <= 4; });
}

TEST_CASE("a mask rule in the kernels' form reaches them unchanged") {
  static_assert(std::is_same_v<decltype(cuda_backend::device_rule(key_band{-3, 4})), key_band>);
  static_assert(std::is_same_v<decltype(cuda_backend::device_rule(every_pair{})), every_pair>);
  const key_band band = cuda_backend::device_rule(key_band{-3, 4});
  CHECK(band.first == -3);
  CHECK(band.last == 4);
}

}  // namespace
