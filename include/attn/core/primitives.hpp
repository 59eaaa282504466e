// Device primitives: the few operations of a Transformer that are not expressions. Gathers
// and scatter-adds by token id, row selections and block copies (decoding's caches), masks
// made from token ids, the label-smoothed loss over the vocabulary and Adam's update (dropout's
// mask is an expression: expr/dropout_mask.hpp). They are declared here once, so that `grad`,
// `nn`, `train` and `decode` call `primitives<Device>::…` and never name a backend; each backend
// specialises the template (cpu/primitives.hpp, cuda/attn/cuda/primitives.cuh), as it does
// `memory` and `executor`.
//
// Pointers are to Device memory unless a parameter says "host". Operations are ordered with
// the device's other work; on the CPU they run when called, on a GPU they are enqueued.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "config.hpp"
#include "device.hpp"
#include "error.hpp"
#include "float16.hpp"

namespace attn {

/// Elements of one array on a device, for primitives that take a list of them.
template <class T>
struct flat_array {
  T* data;
  index_t size;
};

/// What one launch of Adam updates: a parameter, its gradient and its two moments, all of
/// `size` elements.
template <class T>
struct adam_tensor {
  T* value;
  const T* grad;
  T* first_moment;
  T* second_moment;
  index_t size;
};

/// One Adam step's constants (Kingma & Ba, 2015, Algorithm 1, with the bias corrections
/// folded into the step size and into ε's scale):
/// m ← β1·m + (1 − β1)·g, v ← β2·v + (1 − β2)·g², θ ← θ − step_size · m / (√v · root_correction2 + ε).
struct adam_coefficients {
  double beta1, beta2, epsilon;
  double step_size;         // learning rate / (1 − β1^t)
  double root_correction2;  // 1 / √(1 − β2^t)
};

/// An operand whose rows repeat under a [rows, width] array: row r of the array reads row
/// (r / (inner · repeat)) · inner + r mod inner of `data`. A mask [B, Q, K] under attention
/// scores [B, H, Q, K] has inner Q and repeat H; an operand with the array's own rows has
/// repeat 1; a null `data` is no operand.
template <class T>
struct repeated_rows {
  const T* data = nullptr;
  index_t inner = 1;
  index_t repeat = 1;

  ATTN_HOST_DEVICE index_t row(index_t r) const { return r / (inner * repeat) * inner + r % inner; }
};

/// The sums of a label-smoothed cross-entropy over the rows that are not padding.
struct cross_entropy_totals {
  double nll = 0;       // Σ −log p(target)
  double smoothed = 0;  // Σ of the smoothed cross-entropy
  index_t tokens = 0;   // rows whose target is not padding
};

/// What every device's cross_entropy throws for a target that is neither padding nor in
/// [0, classes): the first such position's.
inline extent_error unknown_target(index_t classes, long long id, index_t position) {
  return extent_error("attn::train::cross_entropy", "vocab",
                      "has extent " + std::to_string(classes) + ", but target id " + std::to_string(id) +
                          " was given at position " + std::to_string(position));
}

/// The primitives of a device. The members every backend provides (T float, double, bfloat16
/// or float16, A = accumulate_t<T> the type it computes in: float for the 16-bit types, whose
/// results are rounded once; Id an integer type):
///
///   gather_rows(out, table, rows, width, ids, count, scale)        scale: A
///       out[i, :] = table[ids[i], :] · scale for i < count; throws extent_error for an id
///       outside [0, rows).
///   scatter_add_rows(table, width, rows_in, ids, count, scale)     scale: A
///       table[ids[i], :] += rows_in[i, :] · scale; deterministic (no order-dependent sums). For
///       16-bit T each row of the table gathers its additions in float and is rounded once.
///   select_rows(out, in, rows, width, keep, count)          keep: host
///       out[i, :] = in[keep[i], :]; throws extent_error for a row outside [0, rows).
///   copy_blocks(to, to_stride, from, from_stride, block, count, sources = nullptr)   sources: host
///       count blocks of `block` elements from every from_stride-th to every to_stride-th; with
///       `sources`, block i of `to` is block sources[i] of `from` (a decoding cache's rows reordered).
///   attention_mask(bias, key_ids, sentences, queries, keys, pad, causal, masked)
///       bias[b, q, k] = masked where key k of sentence b is `pad` (or k > q when causal), else 0.
///   cross_entropy(logits, targets, rows, classes, smoothing, pad, probabilities, weight) → totals
///       label-smoothed cross-entropy of every row of logits [rows, classes] against its target:
///       writes softmax(logits) to `probabilities` (A: the loss is computed in float for 16-bit
///       logits, as PyTorch's autocast computes it) and 1 (0 for padding) to weight[rows] (A);
///       returns the totals (on the host). Throws extent_error for a target outside [0, classes).
///   cross_entropy_backward(gradient, probabilities, targets, weight, rows, classes, smoothing, scale)
///       gradient = (p − q) · weight · scale, q the smoothed target, p the probabilities (A) and
///       the gradient T: for T = A it may be written over the probabilities (gradient == probabilities).
///   softmax_rows(out, in, rows, width, scale, bias)           scale: A, bias: repeated_rows<T>
///       out[r, :] = softmax(in[r, :] · scale + bias's row for r), one pass a row; out may be in.
///   log_softmax_rows(out, in, rows, width)                   out: A
///       out[r, :] = in[r, :] − max − log Σ exp(in[r, :] − max), computed in A.
///   softmax_rows_backward(dx, add, y, dy, rows, width, scale)  scale: A
///       dx[r, :] (+)= scale · y ⊙ (dy − Σ dy ⊙ y) over each row: written, or added when `add`.
///   layer_norm_rows(out, row_mean, row_rstd, in, gain, bias, rows, width, epsilon)
///       out = (in − mean) · rstd · gain + bias over each row, rstd = 1/√(var + ε); writes the
///       rows' mean and rstd [rows] (A, as epsilon) for the backward pass.
///   layer_norm_rows_backward(dx, add, gain_grad, bias_grad, dy, in, row_mean, row_rstd, gain, rows, width)
///       dx (+)= rstd · (g − mean(g) − x̂ · mean(g ⊙ x̂)), g = dy ⊙ gain, x̂ = (in − mean) · rstd;
///       gain_grad += Σ_rows dy ⊙ x̂ and bias_grad += Σ_rows dy, summed in an order that does not
///       depend on the thread count. A null dx, gain_grad or bias_grad is not computed.
///   adam_step(tensors, coefficients)                        tensors: host span
///       Adam's update of every tensor (one launch where the device allows it).
///   fill(data, count, value)
///       data[i] = value.
///   fill(arrays, value)                                      arrays: host span
///       x ← value for every element of every array (one launch where the device allows it).
///   sum_of_squares(arrays) → double                         arrays: host span
///       Σ x² over every element of every array, accumulated in double (NaN or ∞ when any is).
///   scale(arrays, factor)                                   arrays: host span
///       x ← T(x · factor) for every element.
template <class Device>
struct primitives;

}  // namespace attn
