// The device primitives (core/primitives.hpp) against plain host loops: gathers and
// scatter-adds by id, row selection, block copies, attention masks, the
// label-smoothed loss and its gradient, softmax and LayerNorm rows forward and backward,
// log-softmax rows (decoding's next-token log-probabilities), Adam,
// norms and fills; odd and size-1 extents, sentinel-guarded outputs, and the errors for bad ids;
// bfloat16 and float16 rows computed in float and each output rounded once (within half a unit
// in the last place of a double reference on the same 16-bit inputs). Built by nvcc for the GPU
// (suite gpu), as C++ against the CPU backend (primitives_test_host.cpp, suite unit), so that
// the references are checked wherever the tests run, and with the GPU's row kernels on the CPU
// emulator (tests/unit/cuda/primitives_emulated.cpp, suite unit).
#include "gpu_test.cuh"

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;
#if defined(ATTN_GPU_TEST_PRIMITIVES)
using prims = ATTN_GPU_TEST_PRIMITIVES;  // tests/unit/cuda/primitives_emulated.cpp: some kernels on the emulator
#else
using prims = attn::primitives<device>;
#endif

using rows_dim = attn::dim<"rows">;
using width_dim = attn::dim<"width">;
using count_dim = attn::dim<"count">;
using matrix = shape<rows_dim, width_dim>;
using list = shape<count_dim>;
using token = std::int32_t;

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, attn::bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, attn::float16>) return "float16";
  else return std::is_same_v<T, float> ? "float" : "double";
}

/// What T computes in (float for the 16-bit types).
template <class T>
using compute = attn::accumulate_t<T>;

/// A large negative mask value that T holds (float16's range ends at 65504).
template <class T>
T masked_value() {
  return std::is_same_v<T, attn::float16> ? T(-6e4f) : T(-1e9f);
}

std::string sizes_text(index_t a, index_t b) { return "[" + std::to_string(a) + "," + std::to_string(b) + "]"; }

/// ids in [0, vocabulary), with repeats.
attn::tensor<token, list, attn::cpu> random_ids(index_t count, index_t vocabulary) {
  return random_host<token>(extents<list>(count), 0, double(vocabulary - 1));
}

/// ids in [0, vocabulary): random with repeats, or, given `runs`, runs of those lengths of ids
/// 0, 1, 2, ... in turn (a run's end where the GPU's kernel reads ids a block's width at a time).
template <class T>
void gather_and_scatter(index_t vocabulary, index_t width, index_t count, std::vector<index_t> runs = {}) {
  std::string tag = type_name<T>() + " " + sizes_text(vocabulary, width) + " x" + std::to_string(count);
  auto ids = random_ids(count, vocabulary);
  if (!runs.empty()) {
    tag += " runs";
    index_t at = 0;
    for (std::size_t run = 0; run < runs.size(); ++run) {
      tag += " " + std::to_string(runs[run]);
      for (index_t i = 0; i < runs[run]; ++i) ids.data()[at++] = token(run);
    }
    if (at != count || index_t(runs.size()) > vocabulary) {
      fail("gather_and_scatter " + tag, "runs that do not make the count or exceed the vocabulary");
      return;
    }
  }
  const auto table = random_host<T>(extents<matrix>(vocabulary, width));
  const compute<T> scale = compute<T>(1.5);
  const auto device_table = upload(table);
  const auto device_ids = upload(ids);

  guarded<T, matrix> out(extents<matrix>(count, width));
  prims::gather_rows(out.view().data(), device_table.data(), vocabulary, width, device_ids.data(), count, scale);
  compare_guarded("gather_rows " + tag, out, reference(extents<matrix>(count, width), [&](auto i) {
                    return double(compute<T>(table.data()[ids.data()[i[0]] * width + i[1]]) * scale);
                  }));

  // The sum of each row's contributions in position order, from the table's old values, in
  // the compute type (float for 16 bits), each element rounded once at the end.
  const auto rows_in = random_host<T>(extents<matrix>(count, width));
  std::vector<compute<T>> sums_in_order(std::size_t(table.size()));
  for (index_t i = 0; i < table.size(); ++i) sums_in_order[std::size_t(i)] = compute<T>(table.data()[i]);
  for (index_t i = 0; i < count; ++i)
    for (index_t c = 0; c < width; ++c)
      sums_in_order[std::size_t(ids.data()[i] * width + c)] += compute<T>(rows_in.data()[i * width + c]) * scale;
  auto expected = table;
  for (index_t i = 0; i < table.size(); ++i) expected.data()[i] = T(sums_in_order[std::size_t(i)]);
  auto device_sums = upload(table);
  prims::scatter_add_rows(device_sums.data(), width, upload(rows_in).data(), device_ids.data(), count, scale);
  const auto sums = download(device_sums);
  bool same = true;
  for (index_t i = 0; i < sums.size(); ++i) same = same && double(sums.data()[i]) == double(expected.data()[i]);
  expect(same, "scatter_add_rows " + tag, "bit for bit the host's sums in position order");
}

void bad_ids() {
  const auto table = upload(random_host<float>(extents<matrix>(5, 3)));
  auto ids = random_ids(4, 5);
  ids.data()[2] = 5;
  const auto device_ids = upload(ids);
  attn::tensor<float, matrix, device> out(extents<matrix>(4, 3));
  std::string message;
  try {
    prims::gather_rows(out.data(), table.data(), 5, 3, device_ids.data(), 4, 1.0f);
  } catch (const attn::extent_error& e) {
    message = e.what();
  }
  expect(message.find("token id 5 was given at position 2") != std::string::npos, "gather_rows refuses id 5 of 5",
         message);
}

template <class T>
void select_and_copy() {
  const index_t rows = 6, width = 37;
  const auto in = random_host<T>(extents<matrix>(rows, width));
  const std::vector<index_t> keep = {5, 0, 0, 3};
  guarded<T, matrix> out(extents<matrix>(index_t(keep.size()), width));
  prims::select_rows(out.view().data(), upload(in).data(), rows, width, keep.data(), index_t(keep.size()));
  compare_guarded("select_rows " + type_name<T>(), out,
                  reference(extents<matrix>(index_t(keep.size()), width),
                            [&](auto i) { return double(in.data()[keep[std::size_t(i[0])] * width + i[1]]); }));

  // Blocks of 5 from every 37th element into every 11th of [6, 11].
  guarded<T, shape<rows_dim, attn::dim<"eleven">>> to(extents<shape<rows_dim, attn::dim<"eleven">>>(rows, 11));
  const auto device_in = upload(in);
  prims::fill(to.view().data(), rows * 11, T{-2});
  prims::copy_blocks(to.view().data(), 11, device_in.data() + 3, width, 5, rows);
  compare_guarded("copy_blocks " + type_name<T>(), to,
                  reference(extents<shape<rows_dim, attn::dim<"eleven">>>(rows, 11), [&](auto i) {
                    return i[1] < 5 ? double(in.data()[i[0] * width + 3 + i[1]]) : -2.0;
                  }));

  // The same blocks from the rows `sources` names, in its order.
  const std::vector<index_t> sources = {4, 4, 0, 5, 1, 2};
  prims::fill(to.view().data(), rows * 11, T{-2});
  prims::copy_blocks(to.view().data(), 11, device_in.data() + 3, width, 5, rows, sources.data());
  compare_guarded("copy_blocks from sources " + type_name<T>(), to,
                  reference(extents<shape<rows_dim, attn::dim<"eleven">>>(rows, 11), [&](auto i) {
                    return i[1] < 5 ? double(in.data()[sources[std::size_t(i[0])] * width + 3 + i[1]]) : -2.0;
                  }));

  // Enough blocks for the CPU's threads to share them (64 KiB each), reversed.
  using many_dim = attn::dim<"blocks">;
  using block_dim = attn::dim<"block">;
  const index_t many = 4099, block = 40;
  const auto big = random_host<T>(extents<shape<many_dim, block_dim>>(many, block));
  std::vector<index_t> reversed(static_cast<std::size_t>(many));
  for (index_t i = 0; i < many; ++i) reversed[std::size_t(i)] = many - 1 - i;
  for (const bool reorder : {false, true}) {
    guarded<T, shape<many_dim, block_dim>> copied(extents<shape<many_dim, block_dim>>(many, block));
    prims::copy_blocks(copied.view().data(), block, upload(big).data(), block, block, many,
                       reorder ? reversed.data() : nullptr);
    compare_guarded(std::string("copy_blocks of ") + std::to_string(many) + (reorder ? " reversed " : " ") +
                        type_name<T>(),
                    copied, reference(extents<shape<many_dim, block_dim>>(many, block), [&](auto i) {
                      const index_t row = reorder ? reversed[std::size_t(i[0])] : i[0];
                      return double(big.data()[row * block + i[1]]);
                    }));
  }
}

template <class T>
void attention_masks() {
  using bias_shape = shape<attn::dim<"b">, attn::dim<"q">, attn::dim<"k">>;
  const index_t sentences = 3, keys = 7;
  auto ids = random_ids(sentences * keys, 4);  // id 0 is padding: some of every kind
  const auto device_ids = upload(ids);
  for (const bool causal : {false, true}) {
    const index_t queries = causal ? keys : 2;
    guarded<T, bias_shape> bias(extents<bias_shape>(sentences, queries, keys));
    prims::attention_mask(bias.view().data(), device_ids.data(), sentences, queries, keys, token{0}, causal,
                          masked_value<T>());
    compare_guarded(std::string("attention_mask ") + (causal ? "causal " : "padding ") + type_name<T>(), bias,
                    reference(extents<bias_shape>(sentences, queries, keys), [&](auto i) {
                      const bool hidden = ids.data()[i[0] * keys + i[2]] == 0 || (causal && i[2] > i[1]);
                      return hidden ? double(masked_value<T>()) : 0.0;
                    }),
                    0.0);
  }
}

template <class T>
void cross_entropy(index_t rows, index_t classes) {
  const std::string tag = type_name<T>() + " " + sizes_text(rows, classes);
  const double smoothing = 0.1;
  const token pad = 0;
  const auto logits = random_host<T>(extents<matrix>(rows, classes), -4.0, 4.0);
  auto targets = random_ids(rows, classes);
  if (rows > 1) targets.data()[rows - 1] = pad;
  if (rows > 2) targets.data()[rows / 2] = pad;  // a padding row that is not the last

  // Reference in double.
  std::vector<double> p(static_cast<std::size_t>(rows * classes)), weight(static_cast<std::size_t>(rows));
  double nll = 0, smoothed = 0;
  index_t tokens = 0;
  for (index_t r = 0; r < rows; ++r) {
    const T* x = logits.data() + r * classes;
    double row_max = x[0], total = 0, sum = 0;
    for (index_t c = 0; c < classes; ++c) row_max = std::max(row_max, double(x[c]));
    for (index_t c = 0; c < classes; ++c) sum += std::exp(double(x[c]) - row_max), total += double(x[c]);
    for (index_t c = 0; c < classes; ++c) p[std::size_t(r * classes + c)] = std::exp(double(x[c]) - row_max) / sum;
    const token target = targets.data()[r];
    weight[std::size_t(r)] = target == pad ? 0.0 : 1.0;
    if (target == pad) continue;
    const double log_sum = std::log(sum) + row_max;
    const double log_p = double(x[target]) - log_sum;
    nll -= log_p;
    smoothed -= (1 - smoothing) * log_p + smoothing * (total / double(classes) - log_sum);
    ++tokens;
  }

  using C = compute<T>;  // the probabilities, the weights and the loss: float for 16-bit logits
  guarded<C, matrix> probabilities(extents<matrix>(rows, classes));
  guarded<C, list> weights{extents<list>(rows)};
  const auto device_targets = upload(targets);
  const auto totals = prims::cross_entropy(upload(logits).data(), device_targets.data(), rows, classes, smoothing, pad,
                                           probabilities.view().data(), weights.view().data());
  compare_guarded("cross_entropy probabilities " + tag, probabilities, p);
  compare_guarded("cross_entropy weight " + tag, weights, weight, 0.0);
  const double tolerance = std::is_same_v<C, float> ? 1e-5 : 1e-12;
  expect(totals.tokens == tokens && std::abs(totals.nll - nll) <= tolerance * std::abs(nll) + 1e-9 &&
             std::abs(totals.smoothed - smoothed) <= tolerance * std::abs(smoothed) + 1e-9,
         "cross_entropy totals " + tag,
         "nll " + std::to_string(totals.nll) + " vs " + std::to_string(nll) + ", smoothed " +
             std::to_string(totals.smoothed) + " vs " + std::to_string(smoothed) + ", tokens " +
             std::to_string(totals.tokens) + " vs " + std::to_string(tokens));

  // The gradient: in place over the probabilities when T computes in itself, else rounded to T.
  const C scale = C(0.25);
  const auto expected_gradient = reference(extents<matrix>(rows, classes), [&](auto i) {
    const double w = weight[std::size_t(i[0])] * double(scale);
    const double q = (i[1] == targets.data()[i[0]] ? 1 - smoothing : 0.0) + smoothing / double(classes);
    return (p[std::size_t(i[0] * classes + i[1])] - q) * w;
  });
  if constexpr (std::is_same_v<T, C>) {
    prims::cross_entropy_backward(probabilities.view().data(), probabilities.view().data(), device_targets.data(),
                                  weights.view().data(), rows, classes, smoothing, scale);
    compare_guarded("cross_entropy_backward " + tag, probabilities, expected_gradient);
  } else {
    guarded<T, matrix> gradient(extents<matrix>(rows, classes));
    prims::cross_entropy_backward(gradient.view().data(), probabilities.view().data(), device_targets.data(),
                                  weights.view().data(), rows, classes, smoothing, scale);
    compare_guarded("cross_entropy_backward " + tag, gradient, expected_gradient);
  }
}

void bad_target() {
  auto targets = random_ids(3, 5);
  targets.data()[1] = 9;
  const auto logits = upload(random_host<float>(extents<matrix>(3, 5)));
  attn::tensor<float, matrix, device> p(extents<matrix>(3, 5));
  attn::tensor<float, list, device> w(extents<list>(3));
  std::string message;
  try {
    prims::cross_entropy(logits.data(), upload(targets).data(), 3, 5, 0.1, token{-1}, p.data(), w.data());
  } catch (const attn::extent_error& e) {
    message = e.what();
  }
  expect(message.find("target id 9 was given at position 1") != std::string::npos, "cross_entropy refuses target 9",
         message);
}

/// Softmax over rows of scores [B, H, Q, K] with a mask [B, Q, K] repeated over the heads, its
/// backward pass written and added; references in double.
template <class T>
void softmax_rows(index_t sentences, index_t heads, index_t queries, index_t keys) {
  const index_t rows = sentences * heads * queries;
  const std::string tag = type_name<T>() + " [" + std::to_string(sentences) + "," + std::to_string(heads) + "," +
                          std::to_string(queries) + "," + std::to_string(keys) + "]";
  const auto x = random_host<T>(extents<matrix>(rows, keys), -3.0, 3.0);
  auto mask = random_host<T>(extents<matrix>(sentences * queries, keys), 0.0, 1.0);
  for (index_t i = 0; i < mask.size(); ++i) mask.data()[i] = double(mask.data()[i]) < 0.3 ? masked_value<T>() : T{0};
  const compute<T> scale = compute<T>(0.7);
  const attn::repeated_rows<T> repeat{nullptr, queries, heads};
  const auto mask_row = [&](index_t r) { return r / (heads * queries) * queries + r % queries; };
  expect(rows == 0 || repeat.row(rows - 1) == mask_row(rows - 1), "repeated_rows::row " + tag, "the last row's");

  const auto softmax = [&](bool masked) {
    std::vector<double> y(static_cast<std::size_t>(rows * keys));
    for (index_t r = 0; r < rows; ++r) {
      std::vector<double> v(static_cast<std::size_t>(keys));
      double row_max = -INFINITY, total = 0;
      for (index_t c = 0; c < keys; ++c) {
        v[std::size_t(c)] = double(x.data()[r * keys + c]) * double(scale) +
                            (masked ? double(mask.data()[mask_row(r) * keys + c]) : 0.0);
        row_max = std::max(row_max, v[std::size_t(c)]);
      }
      for (auto& e : v) total += e = std::exp(e - row_max);
      for (index_t c = 0; c < keys; ++c) y[std::size_t(r * keys + c)] = v[std::size_t(c)] / total;
    }
    return y;
  };
  const auto device_x = upload(x);
  const auto device_mask = upload(mask);
  for (const bool masked : {false, true}) {
    guarded<T, matrix> y(extents<matrix>(rows, keys));
    attn::repeated_rows<T> bias = repeat;
    bias.data = masked ? device_mask.data() : nullptr;
    prims::softmax_rows(y.view().data(), device_x.data(), rows, keys, scale, bias);
    compare_guarded(std::string("softmax_rows ") + (masked ? "masked " : "") + tag, y, softmax(masked));
  }

  // Backward from y = softmax(x · scale + mask): dx = scale · y ⊙ (dy − Σ dy ⊙ y).
  const auto y_ref = softmax(true);
  attn::tensor<T, matrix, attn::cpu> y(extents<matrix>(rows, keys));
  for (index_t i = 0; i < y.size(); ++i) y.data()[i] = T(y_ref[std::size_t(i)]);
  const auto dy = random_host<T>(extents<matrix>(rows, keys));
  std::vector<double> dx(static_cast<std::size_t>(rows * keys));
  for (index_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (index_t c = 0; c < keys; ++c) dot += double(dy.data()[r * keys + c]) * double(y.data()[r * keys + c]);
    for (index_t c = 0; c < keys; ++c)
      dx[std::size_t(r * keys + c)] =
          double(scale) * double(y.data()[r * keys + c]) * (double(dy.data()[r * keys + c]) - dot);
  }
  const auto device_y = upload(y);
  const auto device_dy = upload(dy);
  for (const bool add : {false, true}) {
    guarded<T, matrix> out(extents<matrix>(rows, keys));
    if (add) prims::fill(out.view().data(), rows * keys, T(0.5));
    prims::softmax_rows_backward(out.view().data(), add, device_y.data(), device_dy.data(), rows, keys, scale);
    std::vector<double> expected = dx;
    if (add)
      for (auto& e : expected) e += 0.5;
    compare_guarded(std::string("softmax_rows_backward ") + (add ? "added " : "") + tag, out, expected);
  }
}

/// Next-token log-probabilities over rows of logits [rows, width], in compute<T>; the rows span
/// a wide range so that exp of most entries underflows next to the row's maximum.
template <class T>
void log_softmax_rows(index_t rows, index_t width) {
  const std::string tag = type_name<T>() + " " + sizes_text(rows, width);
  const auto x = random_host<T>(extents<matrix>(rows, width), -60.0, 30.0);
  std::vector<double> expected(static_cast<std::size_t>(rows * width));
  for (index_t r = 0; r < rows; ++r) {
    double row_max = -INFINITY, total = 0;
    for (index_t c = 0; c < width; ++c) row_max = std::max(row_max, double(x.data()[r * width + c]));
    for (index_t c = 0; c < width; ++c) total += std::exp(double(x.data()[r * width + c]) - row_max);
    for (index_t c = 0; c < width; ++c)
      expected[std::size_t(r * width + c)] = double(x.data()[r * width + c]) - row_max - std::log(total);
  }
  guarded<compute<T>, matrix> out(extents<matrix>(rows, width));
  prims::log_softmax_rows(out.view().data(), upload(x).data(), rows, width);
  compare_guarded("log_softmax_rows " + tag, out, expected);
}

/// x and dy of LayerNorm's backward one element past where they start on the device: not on
/// 16 bytes, so that the GPU's kernel reads their rows a column at a time.
template <class T>
attn::tensor<T, list, device> upload_one_past(const attn::tensor<T, matrix, attn::cpu>& host) {
  attn::tensor<T, list, attn::cpu> shifted(extents<list>(host.size() + 1));
  shifted.data()[0] = T(0);
  std::copy(host.data(), host.data() + host.size(), shifted.data() + 1);
  return upload(shifted);
}

/// LayerNorm over rows [rows, width], forward and backward (dx written or added, or not asked
/// for; the gain's and bias's gradients added to what they hold); with `misaligned`, the
/// backward reads x and dy one element past 16 bytes.
template <class T>
void layer_norm_rows(index_t rows, index_t width, bool misaligned = false) {
  const std::string tag = type_name<T>() + " " + sizes_text(rows, width) + (misaligned ? " misaligned" : "");
  using C = compute<T>;  // the rows' statistics
  const C epsilon = C(1e-6);
  const auto x = random_host<T>(extents<matrix>(rows, width), -2.0, 3.0);
  const auto gain = random_host<T>(extents<list>(width), 0.5, 1.5);
  const auto bias = random_host<T>(extents<list>(width));
  const auto dy = random_host<T>(extents<matrix>(rows, width));
  const auto n = [](index_t count) { return static_cast<std::size_t>(count); };
  std::vector<double> mean(n(rows)), rstd(n(rows)), y(n(rows * width)), dx(n(rows * width));
  std::vector<double> gain_grad(n(width), 0.25), bias_grad(n(width), 0.25);
  for (index_t r = 0; r < rows; ++r) {
    const T* row = x.data() + r * width;
    double total = 0, squares = 0;
    for (index_t c = 0; c < width; ++c) total += double(row[c]);
    const double m = total / double(width);
    for (index_t c = 0; c < width; ++c) squares += (double(row[c]) - m) * (double(row[c]) - m);
    const double s = 1 / std::sqrt(squares / double(width) + double(epsilon));
    mean[std::size_t(r)] = m;
    rstd[std::size_t(r)] = s;
    double g_mean = 0, gx_mean = 0;
    for (index_t c = 0; c < width; ++c) {
      const double x_hat = (double(row[c]) - m) * s, d = double(dy.data()[r * width + c]);
      y[std::size_t(r * width + c)] = x_hat * double(gain.data()[c]) + double(bias.data()[c]);
      g_mean += d * double(gain.data()[c]) / double(width);
      gx_mean += d * double(gain.data()[c]) * x_hat / double(width);
      gain_grad[std::size_t(c)] += d * x_hat;
      bias_grad[std::size_t(c)] += d;
    }
    for (index_t c = 0; c < width; ++c) {
      const double x_hat = (double(row[c]) - m) * s, g = double(dy.data()[r * width + c]) * double(gain.data()[c]);
      dx[std::size_t(r * width + c)] = s * (g - g_mean - x_hat * gx_mean);
    }
  }

  const auto device_x = upload(x);
  const auto device_dy = upload(dy);
  const auto x_one_past = upload_one_past(x);
  const auto dy_one_past = upload_one_past(dy);
  const T* const backward_x = misaligned ? x_one_past.data() + 1 : device_x.data();
  const T* const backward_dy = misaligned ? dy_one_past.data() + 1 : device_dy.data();
  const auto device_gain = upload(gain);
  const auto device_bias = upload(bias);
  guarded<T, matrix> out(extents<matrix>(rows, width));
  guarded<C, list> row_mean{extents<list>(rows)}, row_rstd{extents<list>(rows)};
  prims::layer_norm_rows(out.view().data(), row_mean.view().data(), row_rstd.view().data(), device_x.data(),
                         device_gain.data(), device_bias.data(), rows, width, epsilon);
  compare_guarded("layer_norm_rows " + tag, out, y);
  compare_guarded("layer_norm_rows mean " + tag, row_mean, mean);
  compare_guarded("layer_norm_rows rstd " + tag, row_rstd, rstd);

  // The sums over many rows in float: a looser bound than one row's. 16 bits: the half unit of
  // the one rounding, and a tenth more for the float sum of 9001 rows before it (on an H100 the
  // gain's gradient was 0.503 units off where the sum cancels down to a third of its terms).
  const double sum_tolerance = attn::is_float16_storage<T> ? 0.6 : std::is_same_v<T, float> ? 1e-4 : 1e-11;
  for (const int mode : {0, 1, 2}) {  // dx written, dx added, no dx
    const std::string what = mode == 0 ? "" : mode == 1 ? "added " : "without dx ";
    guarded<T, matrix> d_x(extents<matrix>(rows, width));
    guarded<T, list> d_gain{extents<list>(width)}, d_bias{extents<list>(width)};
    prims::fill(d_gain.view().data(), width, T(0.25));
    prims::fill(d_bias.view().data(), width, T(0.25));
    if (mode == 1) prims::fill(d_x.view().data(), rows * width, T(-1));
    prims::layer_norm_rows_backward(mode == 2 ? nullptr : d_x.view().data(), mode == 1, d_gain.view().data(),
                                    d_bias.view().data(), backward_dy, backward_x, row_mean.view().data(),
                                    row_rstd.view().data(), device_gain.data(), rows, width);
    if (mode != 2) {
      std::vector<double> expected = dx;
      if (mode == 1)
        for (auto& e : expected) e -= 1;
      compare_guarded("layer_norm_rows_backward dx " + what + tag, d_x, expected);
    }
    compare_guarded("layer_norm_rows_backward gain " + what + tag, d_gain, gain_grad, sum_tolerance);
    compare_guarded("layer_norm_rows_backward bias " + what + tag, d_bias, bias_grad, sum_tolerance);
  }
  // Only dx: the gain's and bias's gradients are not asked for.
  guarded<T, matrix> only(extents<matrix>(rows, width));
  prims::layer_norm_rows_backward(only.view().data(), false, static_cast<T*>(nullptr), static_cast<T*>(nullptr),
                                  backward_dy, backward_x, row_mean.view().data(), row_rstd.view().data(),
                                  device_gain.data(), rows, width);
  compare_guarded("layer_norm_rows_backward dx only " + tag, only, dx);
}

template <class T>
void adam_and_norms() {
  const std::vector<index_t> sizes = {1, 70001, 5};  // one tensor spans two chunks of a launch
  std::vector<attn::tensor<T, list, attn::cpu>> host[4];  // value, grad, m, v
  std::vector<attn::tensor<T, list, device>> on_device[4];
  for (int k = 0; k < 4; ++k)
    for (const index_t n : sizes) {
      host[k].push_back(random_host<T>(extents<list>(n), k == 3 ? 0.0 : -1.0, 1.0));
      on_device[k].push_back(upload(host[k].back()));
    }
  const attn::adam_coefficients c{0.9, 0.98, 1e-9, 0.003 / (1 - 0.9 * 0.9), 1 / std::sqrt(1 - 0.98 * 0.98)};
  std::vector<attn::adam_tensor<T>> tensors;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    tensors.push_back({on_device[0][i].data(), on_device[1][i].data(), on_device[2][i].data(), on_device[3][i].data(),
                       sizes[i]});
  prims::adam_step(std::span<const attn::adam_tensor<T>>(tensors), c);
  bool same = true;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto value = download(on_device[0][i]);
    for (index_t j = 0; j < sizes[i]; ++j) {
      // The host's order of operations, each rounded to T (cpu/primitives.hpp).
      const T g = host[1][i].data()[j];
      const T m = T(c.beta1) * host[2][i].data()[j] + T(1 - c.beta1) * g;
      const T v = T(c.beta2) * host[3][i].data()[j] + T(1 - c.beta2) * g * g;
      const T expected = host[0][i].data()[j] -
                         T(c.step_size) * m / (std::sqrt(v) * T(c.root_correction2) + T(c.epsilon));
      same = same && value.data()[j] == expected;
    }
  }
  expect(same, "adam_step " + type_name<T>() + " (3 tensors, 70007 elements)", "bit for bit the host's update");

  std::vector<attn::flat_array<const T>> arrays;
  double expected = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    arrays.push_back({on_device[1][i].data(), sizes[i]});
    for (index_t j = 0; j < sizes[i]; ++j) expected += double(host[1][i].data()[j]) * double(host[1][i].data()[j]);
  }
  const double squares = prims::sum_of_squares(std::span<const attn::flat_array<const T>>(arrays));
  expect(std::abs(squares - expected) <= 1e-12 * expected, "sum_of_squares " + type_name<T>(),
         std::to_string(squares) + " vs " + std::to_string(expected));

  std::vector<attn::flat_array<T>> scaled = {{on_device[1][1].data(), sizes[1]}};
  prims::scale(std::span<const attn::flat_array<T>>(scaled), 0.5);
  compare("scale " + type_name<T>(), download(on_device[1][1]),
          reference(extents<list>(sizes[1]), [&](auto i) { return double(T(double(host[1][1].data()[i[0]]) * 0.5)); }),
          0.0);

  // The first moments filled, but for the first and last element of the long one (two chunks).
  const auto before = download(on_device[2][1]);  // Adam's moments by now
  std::vector<attn::flat_array<T>> filled;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    filled.push_back(i == 1 ? attn::flat_array<T>{on_device[2][i].data() + 1, sizes[i] - 2}
                            : attn::flat_array<T>{on_device[2][i].data(), sizes[i]});
  prims::fill(std::span<const attn::flat_array<T>>(filled), T(0.25));
  for (std::size_t i = 0; i < sizes.size(); ++i)
    compare("fill over arrays " + type_name<T>() + " (array " + std::to_string(i) + ")", download(on_device[2][i]),
            reference(extents<list>(sizes[i]),
                      [&](auto at) {
                        const bool outside = i == 1 && (at[0] == 0 || at[0] == sizes[i] - 1);
                        return outside ? double(before.data()[at[0]]) : 0.25;
                      }),
            0.0);
}

template <class T>
void all_of_type() {
  for (const index_t vocabulary : {index_t{1}, index_t{7}})
    for (const index_t width : {index_t{1}, index_t{33}, index_t{512}})
      for (const index_t count : {index_t{1}, index_t{17}}) gather_and_scatter<T>(vocabulary, width, count);
  gather_and_scatter<T>(50, 64, 3000);  // many repeats of each id
  gather_and_scatter<T>(2, 40, 1500);    // runs of hundreds of positions: many windows of a block's width
  gather_and_scatter<T>(3, 2100, 40);    // more columns than a block's threads hold at once (8 × 256)
  // Width 40: blocks of 64 threads, windows of 64 positions. Runs that end at a window's edge,
  // one past it, fill two windows exactly, and one id everywhere.
  gather_and_scatter<T>(3, 40, 193, {64, 65, 64});
  gather_and_scatter<T>(1, 40, 128, {128});
  gather_and_scatter<T>(1, 40, 129, {129});
  gather_and_scatter<T>(2, 2100, 300, {257, 43});  // a run of several windows, more columns than held at once
  select_and_copy<T>();
  attention_masks<T>();
  for (const index_t rows : {index_t{1}, index_t{5}})
    for (const index_t classes : {index_t{1}, index_t{3}, index_t{1000}, index_t{5003}}) cross_entropy<T>(rows, classes);
  cross_entropy<T>(13, 700);  // more rows than the emulator's 5 blocks: a block goes round, past a padding row
  if constexpr (!attn::is_float16_storage<T>) adam_and_norms<T>();  // the parameters' types
  softmax_rows<T>(1, 1, 1, 1);
  softmax_rows<T>(2, 3, 5, 7);
  softmax_rows<T>(3, 2, 17, 129);
  softmax_rows<T>(1, 4, 3, 1000);
  for (const index_t rows : {index_t{1}, index_t{5}})
    for (const index_t width : {index_t{1}, index_t{33}, index_t{4003}}) log_softmax_rows<T>(rows, width);
  // 4000: 250 blocks, 16 groups of blocks, the last of 10; 9001: more than 512 blocks of 16.
  // The backward's runs of 16 bytes at 512 (a team of 64, 128 or 256 threads a row by the type);
  // 1000: teams of 128 (16 bits), 256 (float) and two rounds of runs of 256 threads (double);
  // 33 and the misaligned rows a column at a time; 40 000: 79 rows a block, two windows of 64,
  // in runs and a column at a time (in one type: the emulator takes seconds a case).
  for (const index_t rows : {index_t{1}, index_t{17}, index_t{4000}, index_t{9001}})
    for (const index_t width : {index_t{1}, index_t{33}, index_t{512}}) layer_norm_rows<T>(rows, width);
  layer_norm_rows<T>(17, 1000);
  layer_norm_rows<T>(17, 512, true);
  if constexpr (std::is_same_v<T, attn::bfloat16>) {
    layer_norm_rows<T>(40000, 8);
    layer_norm_rows<T>(40000, 8, true);
  }
}

/// `--races`: LayerNorm's backward, whose blocks share sums through shared memory between
/// barriers, on small cases of each road (teams of a row, rounds of runs, rows a column at a
/// time, two windows) and checked as in the full run: for compute-sanitizer's racecheck and
/// synccheck (scripts/gpu.sh, ATTN_GPU_RACECHECK), which would take hours over the whole test.
template <class T>
void races_of_type() {
  layer_norm_rows<T>(17, 512);
  layer_norm_rows<T>(17, 1000);
  layer_norm_rows<T>(17, 512, true);
  layer_norm_rows<T>(17, 33);
}

}  // namespace

int main(int argc, char** argv) {
  if (const int skip = skip_without_device()) return skip;
  if (argc > 1 && std::string(argv[1]) == "--races") {
    try {
      races_of_type<float>();
      races_of_type<double>();
      races_of_type<attn::bfloat16>();
      layer_norm_rows<attn::bfloat16>(40000, 8);
    } catch (const std::exception& e) {
      fail("unexpected exception", e.what());
    }
    return finish();
  }
  try {
    all_of_type<float>();
    all_of_type<double>();
    all_of_type<attn::bfloat16>();
    all_of_type<attn::float16>();
    bad_ids();
    bad_target();
  } catch (const std::exception& e) {
    fail("unexpected exception", e.what());
  }
  return finish();
}
