// Tests of include/attn/train/batching.hpp: token-budget batches, epoch orders, batch layout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <set>
#include <type_traits>
#include <vector>

#include <attn/core/random.hpp>
#include <attn/train/batching.hpp>

namespace {

using attn::train::example;
using attn::train::make_batch;
using attn::train::plan_batches;
using batches = std::vector<std::vector<std::uint32_t>>;

/// Examples of random lengths (0 .. max_length) with ids that say where they came from.
std::vector<example> random_examples(std::size_t count, std::size_t max_length, std::uint64_t seed) {
  const attn::random_stream stream(seed);
  std::vector<example> examples(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto source = static_cast<std::size_t>(stream.bits(2 * i) % (max_length + 1));
    const auto target = static_cast<std::size_t>(stream.bits(2 * i + 1) % (max_length + 1));
    examples[i].source.assign(source, static_cast<std::int32_t>(4 + i % 1000));
    examples[i].target.assign(target, static_cast<std::int32_t>(5 + i % 1000));
  }
  return examples;
}

/// Each index 0 .. count - 1 exactly once.
bool is_partition(const batches& plan, std::size_t count) {
  std::vector<int> seen(count, 0);
  for (const auto& batch : plan) {
    if (batch.empty()) return false;
    for (const auto i : batch) {
      if (i >= count) return false;
      ++seen[i];
    }
  }
  return std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; });
}

bool is_permutation_of_iota(std::vector<std::uint32_t> order) {
  std::sort(order.begin(), order.end());
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] != i) return false;
  return true;
}

}  // namespace

TEST_CASE("batches respect the token budget and hold every example once") {
  for (const std::size_t budget : {std::size_t{40}, std::size_t{200}, std::size_t{1000}, std::size_t{25000}}) {
    CAPTURE(budget);
    const auto examples = random_examples(3000, 60, budget);
    const auto plan = plan_batches(examples, budget, 7);
    CHECK(is_partition(plan, examples.size()));
    for (const auto& batch : plan) {
      std::size_t longest_source = 0, longest_target = 0;
      for (const auto i : batch) {
        longest_source = std::max(longest_source, examples[i].source.size() + 1);
        longest_target = std::max(longest_target, examples[i].target.size() + 1);
      }
      if (batch.size() == 1) continue;  // a single example may exceed the budget
      CHECK(batch.size() * longest_source <= budget);
      CHECK(batch.size() * longest_target <= budget);
    }
  }
}

TEST_CASE("batches group equal lengths and fill the budget") {
  const auto examples = random_examples(5000, 50, 3);
  const std::size_t budget = 2000;
  const auto plan = plan_batches(examples, budget, 11);
  // Sorted by target length: each batch's targets are no longer than the next batch's.
  for (std::size_t b = 0; b + 1 < plan.size(); ++b) {
    std::size_t longest = 0, shortest_next = SIZE_MAX;
    for (const auto i : plan[b]) longest = std::max(longest, examples[i].target.size());
    for (const auto i : plan[b + 1]) shortest_next = std::min(shortest_next, examples[i].target.size());
    CHECK(longest <= shortest_next);
  }
  // Greedy cutting: the first example of the next batch would not have fitted.
  for (std::size_t b = 0; b + 1 < plan.size(); ++b) {
    std::size_t longest_source = 0, longest_target = 0;
    for (const auto i : plan[b]) {
      longest_source = std::max(longest_source, examples[i].source.size() + 1);
      longest_target = std::max(longest_target, examples[i].target.size() + 1);
    }
    const example& next = examples[plan[b + 1].front()];
    const std::size_t count = plan[b].size() + 1;
    CHECK((count * std::max(longest_source, next.source.size() + 1) > budget ||
           count * std::max(longest_target, next.target.size() + 1) > budget));
  }
}

TEST_CASE("examples over the budget get batches of their own") {
  std::vector<example> examples(4);
  examples[0].source.assign(3, 7);
  examples[0].target.assign(3, 7);
  examples[1].source.assign(50, 7);  // 51 > 20 on its own
  examples[1].target.assign(3, 7);
  examples[2].source.assign(3, 7);
  examples[2].target.assign(3, 7);
  examples[3].source.assign(2, 7);
  examples[3].target.assign(30, 7);  // 31 > 20
  const auto plan = plan_batches(examples, 20, 1);
  CHECK(is_partition(plan, 4));
  // Sorted by target length, then source: {0, 2} fit together (2 · 4 ≤ 20), then 1, then 3.
  REQUIRE(plan.size() == 3);
  CHECK(std::set<std::uint32_t>(plan[0].begin(), plan[0].end()) == std::set<std::uint32_t>{0, 2});
  CHECK(plan[1] == std::vector<std::uint32_t>{1});
  CHECK(plan[2] == std::vector<std::uint32_t>{3});

  CHECK(plan_batches({}, 100, 1).empty());
  CHECK(is_partition(plan_batches(examples, 0, 1), 4));  // no budget: one example a batch
  CHECK(plan_batches(examples, 0, 1).size() == 4);
}

TEST_CASE("plans are deterministic in the seed; ties are broken by it") {
  const auto examples = random_examples(2000, 10, 5);  // short: many equal lengths
  const auto plan = plan_batches(examples, 300, 42);
  CHECK(plan_batches(examples, 300, 42) == plan);
  CHECK(plan_batches(examples, 300, 43) != plan);

  // Equal-length examples fill batches in a seeded, not an index, order.
  std::vector<example> equal(100);
  for (auto& e : equal) e.source = e.target = {9, 9, 9};
  const auto first = plan_batches(equal, 40, 1);  // 10 a batch
  REQUIRE(first.size() == 10);
  CHECK(plan_batches(equal, 40, 1) == first);
  CHECK(plan_batches(equal, 40, 2) != first);
  std::vector<std::uint32_t> in_index_order(10);
  std::iota(in_index_order.begin(), in_index_order.end(), 0u);
  CHECK(first[0] != in_index_order);
}

TEST_CASE("epoch orders are permutations that differ between epochs and seeds") {
  using attn::train::epoch_order;
  const std::size_t count = 200;
  std::set<std::vector<std::uint32_t>> orders;
  for (std::uint64_t epoch = 0; epoch < 20; ++epoch) {
    const auto order = epoch_order(count, 9, epoch);
    REQUIRE(order.size() == count);
    CHECK(is_permutation_of_iota(order));
    CHECK(epoch_order(count, 9, epoch) == order);  // a function of (seed, epoch)
    orders.insert(order);
  }
  CHECK(orders.size() == 20);
  CHECK(epoch_order(count, 10, 0) != epoch_order(count, 9, 0));

  CHECK(epoch_order(0, 1, 0).empty());
  CHECK(epoch_order(1, 1, 5) == std::vector<std::uint32_t>{0});

  // Roughly uniform: each batch lands in the first half about half the time.
  std::vector<int> first_half(16, 0);
  for (std::uint64_t epoch = 0; epoch < 4000; ++epoch) {
    const auto order = epoch_order(16, 3, epoch);
    for (std::size_t k = 0; k < 8; ++k) ++first_half[order[k]];
  }
  for (const int n : first_half) CHECK(std::abs(n - 2000) < 200);
}

TEST_CASE("data positions compare by value") {
  attn::train::data_position position;
  CHECK(position.epoch == 0);
  CHECK(position.index == 0);
  CHECK(position == attn::train::data_position{0, 0});
  CHECK(position != attn::train::data_position{0, 1});
}

TEST_CASE("make_batch lays out source + eos, bos + target, target + eos, padded") {
  constexpr std::int32_t pad = 0, bos = 2, eos = 3;
  std::vector<example> examples(3);
  examples[0] = {{10, 11, 12}, {20, 21}};
  examples[1] = {{13}, {22, 23, 24, 25}};
  examples[2] = {{}, {26}};
  const std::vector<std::uint32_t> indices = {1, 0, 2};
  const auto batch = make_batch(examples, indices, pad, bos, eos);

  static_assert(std::is_same_v<decltype(batch.source),
                               attn::tensor<std::int32_t, attn::shape<attn::nn::batch, attn::nn::src>>>);
  static_assert(std::is_same_v<decltype(batch.target_in),
                               attn::tensor<std::int32_t, attn::shape<attn::nn::batch, attn::nn::tgt>>>);
  CHECK(batch.sentences() == 3);
  REQUIRE(batch.source.extent<attn::nn::batch>() == 3);
  REQUIRE(batch.source.extent<attn::nn::src>() == 4);       // longest source 3, + eos
  REQUIRE(batch.target_in.extent<attn::nn::tgt>() == 5);    // longest target 4, + bos
  REQUIRE(batch.target_out.extent<attn::nn::tgt>() == 5);

  const auto row = [](const auto& t, int r) {
    std::vector<std::int32_t> values;
    const auto columns = t.size() / t.template extent<attn::nn::batch>();
    for (attn::index_t c = 0; c < columns; ++c) values.push_back(t(r, c));
    return values;
  };
  using ids = std::vector<std::int32_t>;
  CHECK(row(batch.source, 0) == ids{13, eos, pad, pad});
  CHECK(row(batch.source, 1) == ids{10, 11, 12, eos});
  CHECK(row(batch.source, 2) == ids{eos, pad, pad, pad});
  CHECK(row(batch.target_in, 0) == ids{bos, 22, 23, 24, 25});
  CHECK(row(batch.target_in, 1) == ids{bos, 20, 21, pad, pad});
  CHECK(row(batch.target_in, 2) == ids{bos, 26, pad, pad, pad});
  CHECK(row(batch.target_out, 0) == ids{22, 23, 24, 25, eos});
  CHECK(row(batch.target_out, 1) == ids{20, 21, eos, pad, pad});
  CHECK(row(batch.target_out, 2) == ids{26, eos, pad, pad, pad});
  CHECK(batch.source_tokens == 2 + 4 + 1);
  CHECK(batch.target_tokens == 5 + 3 + 2);

  // Another pad id fills every padding position.
  const auto other = make_batch(examples, std::vector<std::uint32_t>{2, 0}, -1, bos, eos);
  CHECK(row(other.source, 0) == ids{eos, -1, -1, -1});
  CHECK(row(other.target_out, 0) == ids{26, eos, -1});
  CHECK(other.source_tokens == 1 + 4);
  CHECK(other.target_tokens == 2 + 3);

  CHECK_THROWS_AS(make_batch(examples, std::vector<std::uint32_t>{3}, pad, bos, eos), std::out_of_range);
  const attn::train::batch empty;
  CHECK(empty.sentences() == 0);
}

TEST_CASE("every planned batch fits its budget once laid out") {
  const auto examples = random_examples(1500, 40, 17);
  const std::size_t budget = 500;
  const auto plan = plan_batches(examples, budget, 5);
  std::size_t source_tokens = 0, target_tokens = 0;
  for (const auto b : attn::train::epoch_order(plan.size(), 5, 0)) {
    const auto batch = make_batch(examples, plan[b], 0, 2, 3);
    if (plan[b].size() > 1) {
      CHECK(static_cast<std::size_t>(batch.source.size()) <= budget);
      CHECK(static_cast<std::size_t>(batch.target_in.size()) <= budget);
    }
    source_tokens += batch.source_tokens;
    target_tokens += batch.target_tokens;
  }
  std::size_t expected_source = 0, expected_target = 0;
  for (const auto& e : examples) {
    expected_source += e.source.size() + 1;
    expected_target += e.target.size() + 1;
  }
  CHECK(source_tokens == expected_source);
  CHECK(target_tokens == expected_target);
}
