// What each query may attend to (paper §3.2.3: padding is hidden, and the decoder's
// self-attention sees no later position). Two forms of the same mask: the fused kernel reads
// each sentence's key count and whether attention is causal (O(batch) memory); products and a
// softmax add a bias [batch, queries, keys] that is 0 where a query may attend to a key and a
// large negative number where it may not ("setting to −∞").
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "../core/fused_attention.hpp"
#include "../core/primitives.hpp"
#include "../core/tensor.hpp"
#include "../core/transfer.hpp"
#include "dims.hpp"

namespace attn::nn {

/// Added to scores of forbidden keys. Finite, so a row with every key masked stays a number;
/// large enough that exp(score + bias − max) is exactly 0 in float and double (and bfloat16,
/// which has float's range; float16's ends at 65504, so it takes −60000, whose exp is 0 too).
template <class T>
inline constexpr T masked = std::is_same_v<T, float16> ? T(-6e4f) : T(-1e9);
static_assert(masked<float> <= hidden_bias, "attn::nn: the fused kernel must see masked keys as hidden");

/// The mask of a batch of B sentences, Q queries each, over their keys. Copies share it: the
/// bias is built at its first use and only once for all the layers that read it, and never
/// when every reader is the fused kernel.
template <class T, class B, class Q, class Device>
class attention_mask {
 public:
  using bias_type = tensor<T, shape<B, Q, keys>, Device>;
  using lengths_type = tensor<index_t, shape<B>, Device>;

  /// Every key visible to every query.
  attention_mask(index_t sentences, index_t queries, index_t key_count)
      : state_(std::make_shared<state>(sentences, queries, key_count)) {}

  /// A bias given as it is (0 where visible, `masked` where not): read by the fused kernel too,
  /// a pair at a time.
  explicit attention_mask(bias_type bias)
      : state_(std::make_shared<state>(bias.template extent<B>(), bias.template extent<Q>(),
                                       bias.template extent<keys>())) {
    state_->explicit_bias = true;
    state_->bias.emplace(std::move(bias));
  }

  /// Keys of sentence b that are `pad` are hidden, and with `causal` every key after the query's
  /// own position: key_ids [sentences, keys] on the host.
  template <class K>
  static attention_mask of_tokens(const tensor<token, shape<B, K>, cpu>& key_ids, index_t queries, token pad,
                                  bool causal) {
    const index_t sentences = key_ids.template extent<B>();
    const index_t length = key_ids.template extent<K>();
    attention_mask mask(sentences, queries, length);
    state& s = *mask.state_;
    s.key_ids.assign(key_ids.data(), key_ids.data() + key_ids.size());
    s.pad = pad;
    s.causal = causal;
    // Padding after a sentence's last token is its key count; padding between tokens is not a
    // count, so such a batch is read through the bias.
    std::vector<index_t> lengths(std::size_t(sentences), 0);
    bool suffix = true;
    for (index_t b = 0; b < sentences; ++b) {
      const token* ids = key_ids.data() + b * length;
      index_t end = length;
      while (end > 0 && ids[end - 1] == pad) --end;
      for (index_t k = 0; k < end; ++k) suffix = suffix && ids[k] != pad;
      lengths[std::size_t(b)] = end;
    }
    if (suffix) {
      tensor<index_t, shape<B>, cpu> host(extents<shape<B>>(sentences), uninitialized);
      std::copy(lengths.begin(), lengths.end(), host.data());
      s.key_lengths.emplace(to_device<Device>(host));
    }
    return mask;
  }

  index_t sentences() const noexcept { return state_->sentences; }
  index_t queries() const noexcept { return state_->queries; }
  index_t key_count() const noexcept { return state_->key_count; }

  /// Whether the kernel's form says all: key_lengths() (null: every key) and causal() with no
  /// bias. False for a given bias and for padding between a sentence's tokens.
  bool kernel_form() const noexcept { return !state_->explicit_bias && (state_->key_ids.empty() || state_->key_lengths); }
  /// The sentences' key counts, null when every key is visible (or when !kernel_form()).
  const lengths_type* key_lengths() const noexcept { return state_->key_lengths ? &*state_->key_lengths : nullptr; }
  bool causal() const noexcept { return state_->causal && kernel_form(); }

  /// The additive form [B, Q, keys], built on the first call.
  const bias_type& bias() const {
    state& s = *state_;
    if (!s.bias) {
      const extents<shape<B, Q, keys>> size(s.sentences, s.queries, s.key_count);
      if (s.key_ids.empty()) {
        s.bias.emplace(size);  // zeros: every key visible
      } else {
        bias_type bias(size, uninitialized);
        tensor<token, shape<B, keys>, cpu> host(extents<shape<B, keys>>(s.sentences, s.key_count), uninitialized);
        std::copy(s.key_ids.begin(), s.key_ids.end(), host.data());
        const auto ids = to_device<Device>(host);
        primitives<Device>::attention_mask(bias.data(), ids.data(), s.sentences, s.queries, s.key_count, s.pad, s.causal,
                                           masked<T>);
        s.bias.emplace(std::move(bias));
      }
    }
    return *s.bias;
  }
  /// Whether bias() has been built (tests: the fused path never builds it).
  bool has_bias() const noexcept { return state_->bias.has_value(); }

 private:
  struct state {
    state(index_t sentences_, index_t queries_, index_t keys_)
        : sentences(sentences_), queries(queries_), key_count(keys_) {
      if (sentences < 0 || queries < 0 || key_count < 0)
        throw std::invalid_argument("attn::nn::attention_mask: negative extents " + std::to_string(sentences) + ", " +
                                    std::to_string(queries) + ", " + std::to_string(key_count));
    }
    index_t sentences, queries, key_count;
    std::vector<token> key_ids;  // empty: every key visible
    token pad = 0;
    bool causal = false;
    bool explicit_bias = false;
    std::optional<lengths_type> key_lengths;
    std::optional<bias_type> bias;
  };
  std::shared_ptr<state> state_;
};

/// Keys that are padding are hidden from every query: encoder self-attention and
/// encoder-decoder attention. `queries` is the number of query positions.
template <class T, class Q, class K, class Device>
attention_mask<T, batch, Q, Device> padding_mask(const tensor<token, shape<batch, K>, Device>& key_ids,
                                                 index_t queries, token pad) {
  return attention_mask<T, batch, Q, Device>::of_tokens(to_host(key_ids), queries, pad, false);
}

/// Decoder self-attention: position i sees positions ≤ i that are not padding, so that
/// predictions for position i depend only on the outputs before it (§3.2.3).
template <class T, class Q, class Device>
attention_mask<T, batch, Q, Device> causal_mask(const tensor<token, shape<batch, Q>, Device>& ids, token pad) {
  return attention_mask<T, batch, Q, Device>::of_tokens(to_host(ids), ids.template extent<Q>(), pad, true);
}

}  // namespace attn::nn
