// Batches by approximate length under a token budget (paper §5.1), their order in each epoch,
// and their layout as model inputs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/random.hpp"
#include "../core/tensor.hpp"
#include "../nn/dims.hpp"
#include "data.hpp"

namespace attn::train {

namespace detail {

inline void check_index_range(std::size_t count, const char* operation, const char* what) {
  if (count > std::numeric_limits<std::uint32_t>::max())
    throw std::length_error(std::string(operation) + ": " + std::to_string(count) + " " + what +
                            " do not fit 32-bit indices");
}

/// Salt for the streams epoch_order draws from, so that they share no counters with the
/// tie-breaking keys plan_batches draws from the same seed.
inline constexpr std::uint64_t epoch_order_salt = 0x65706f63685f6f72ULL;  // "epoch_or"

}  // namespace detail

/// §5.1: "Sentence pairs were batched together by approximate sequence length. Each training
/// batch contained a set of sentence pairs containing approximately 25000 source tokens and
/// 25000 target tokens." Examples are sorted by (target length, source length), equal lengths
/// in an order shuffled by `seed`, then cut into runs whose padded size stays within the
/// budget: count · (longest source + 1) ≤ batch_tokens and count · (longest target + 1) ≤
/// batch_tokens, the +1 being the eos or bos make_batch adds. An example over the budget on
/// its own gets a batch of its own. Every example is in exactly one batch; batches come
/// shortest first and hold indices into `examples`.
inline std::vector<std::vector<std::uint32_t>> plan_batches(const std::vector<example>& examples,
                                                            std::size_t batch_tokens, std::uint64_t seed) {
  detail::check_index_range(examples.size(), "attn::train::plan_batches", "examples");
  struct sort_key {
    std::size_t target, source;
    std::uint64_t tie;  // random: equal lengths in a seeded order
    std::uint32_t index;
  };
  const random_stream stream(seed);
  std::vector<sort_key> keys(examples.size());
  for (std::uint32_t i = 0; i < keys.size(); ++i)
    keys[i] = {examples[i].target.size(), examples[i].source.size(), stream.bits(i), i};
  // A strict total order (the index decides last): the result does not depend on the sort.
  std::sort(keys.begin(), keys.end(), [](const sort_key& a, const sort_key& b) {
    return std::tie(a.target, a.source, a.tie, a.index) < std::tie(b.target, b.source, b.tie, b.index);
  });

  std::vector<std::vector<std::uint32_t>> batches;
  std::vector<std::uint32_t> current;
  std::size_t longest_source = 0, longest_target = 0;  // padded lengths, eos / bos included
  for (const sort_key& key : keys) {
    std::size_t source = std::max(longest_source, key.source + 1);
    std::size_t target = std::max(longest_target, key.target + 1);
    const std::size_t count = current.size() + 1;
    if (!current.empty() && (count * source > batch_tokens || count * target > batch_tokens)) {
      batches.push_back(std::move(current));
      current.clear();
      source = key.source + 1;
      target = key.target + 1;
    }
    current.push_back(key.index);
    longest_source = source;
    longest_target = target;
  }
  if (!current.empty()) batches.push_back(std::move(current));
  return batches;
}

/// The order of the batches in epoch `epoch`: a uniformly drawn permutation of
/// 0 .. batch_count - 1 that depends only on (seed, epoch), so a run resumed from a
/// checkpoint sees the same order. Different epochs draw independent permutations.
inline std::vector<std::uint32_t> epoch_order(std::size_t batch_count, std::uint64_t seed,
                                              std::uint64_t epoch) {
  detail::check_index_range(batch_count, "attn::train::epoch_order", "batches");
  std::vector<std::uint32_t> order(batch_count);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  const random_stream stream(random_stream(seed ^ detail::epoch_order_salt).bits(epoch));
  // Fisher–Yates; the modulo's bias is below batch_count / 2^64.
  for (std::size_t i = batch_count; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(stream.bits(i) % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

/// Where training is in the data: the epoch, and how many batches of that epoch's order have
/// been used. Saved in checkpoints.
struct data_position {
  std::uint64_t epoch = 0, index = 0;
  friend bool operator==(const data_position&, const data_position&) = default;
};

/// A batch as model inputs, one sentence a row, padded to the longest in the batch:
/// source = ids + eos, target_in = bos + ids (what the decoder reads), target_out = ids + eos
/// (what it should predict).
struct batch {
  tensor<nn::token, shape<nn::batch, nn::src>> source{0, 0};      // [batch, src]
  tensor<nn::token, shape<nn::batch, nn::tgt>> target_in{0, 0};   // [batch, tgt]
  tensor<nn::token, shape<nn::batch, nn::tgt>> target_out{0, 0};  // [batch, tgt]
  std::size_t source_tokens = 0;  // tokens that are not padding, eos included
  std::size_t target_tokens = 0;  // the same over target_out: the tokens the loss averages over

  std::size_t sentences() const { return static_cast<std::size_t>(source.extent<nn::batch>()); }
};

/// Lays out the examples at `indices` (in that order) as a batch; padding is `pad`.
inline batch make_batch(const std::vector<example>& examples, std::span<const std::uint32_t> indices,
                        std::int32_t pad, std::int32_t bos, std::int32_t eos) {
  std::size_t longest_source = 0, longest_target = 0;
  for (const std::uint32_t i : indices) {
    if (i >= examples.size())
      throw std::out_of_range("attn::train::make_batch: index " + std::to_string(i) + " is outside the " +
                              std::to_string(examples.size()) + " examples");
    longest_source = std::max(longest_source, examples[i].source.size());
    longest_target = std::max(longest_target, examples[i].target.size());
  }
  const auto rows = static_cast<index_t>(indices.size());
  const auto source_columns = static_cast<index_t>(longest_source + 1);
  const auto target_columns = static_cast<index_t>(longest_target + 1);
  batch result{.source = tensor<nn::token, shape<nn::batch, nn::src>>(rows, source_columns),
               .target_in = tensor<nn::token, shape<nn::batch, nn::tgt>>(rows, target_columns),
               .target_out = tensor<nn::token, shape<nn::batch, nn::tgt>>(rows, target_columns)};
  std::fill_n(result.source.data(), result.source.size(), pad);
  std::fill_n(result.target_in.data(), result.target_in.size(), pad);
  std::fill_n(result.target_out.data(), result.target_out.size(), pad);

  for (index_t row = 0; row < rows; ++row) {
    const example& pair = examples[indices[static_cast<std::size_t>(row)]];
    nn::token* source = result.source.data() + row * source_columns;
    nn::token* target_in = result.target_in.data() + row * target_columns;
    nn::token* target_out = result.target_out.data() + row * target_columns;
    std::copy(pair.source.begin(), pair.source.end(), source);
    source[pair.source.size()] = eos;
    target_in[0] = bos;
    std::copy(pair.target.begin(), pair.target.end(), target_in + 1);
    std::copy(pair.target.begin(), pair.target.end(), target_out);
    target_out[pair.target.size()] = eos;
    result.source_tokens += pair.source.size() + 1;
    result.target_tokens += pair.target.size() + 1;
  }
  return result;
}

}  // namespace attn::train
