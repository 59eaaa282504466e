// What a user's program instantiates, for a second compiler to read (tests/consumer/meson.build:
// clang++ -fsyntax-only, warnings as errors): every elementwise operation, reductions,
// broadcasts, slices and products in float and bfloat16; a Transformer trained a step in float
// and in bfloat16 with loss scaling, its attention chosen at run time among the variants, fused
// and unfused, then decoded by beam search and greedily from its key/value cache. Nothing is
// generated or run.
#include <attn/attn.hpp>
#include <attn/decode.hpp>
#include <attn/nn.hpp>
#include <attn/train.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

using namespace attn;

struct small : nn::config<nn::widths<16, 32, 2, 8, 8>, 2> {};

/// Attention chosen at run time, as attn-train's --attention does (examples/common/variants.hpp).
struct any_attention : small {
  template <class T, class Config, class Device>
  using attention = nn::one_of<T, Config, Device, nn::scaled_dot_product, nn::dot_product, nn::additive,
                               nn::restricted, nn::alibi>;
};

using rows = dim<"rows">;
using cols = dim<"cols", 4>;
using inner = dim<"inner", 3>;

template <class T>
float expressions() {
  tensor<T, shape<rows, cols>> a(5), b(5);
  tensor<T, shape<cols>> row(extents<shape<cols>>{});
  tensor<T, shape<rows, inner>> x(5);
  tensor<T, shape<inner, cols>> w;
  const auto arithmetic = eval(-a + b - a * b / (abs(a) + T(1)));
  const auto functions = eval(exp(a) + log(abs(b) + T(1)) + sqrt(abs(a)) + rsqrt(abs(b) + T(1)) + tanh(a) + relu(b));
  const auto extremes = eval(max(a, b) - min(a, b));
  const auto compared = eval(where(a < b, a, b) + where(a <= b, a, b) + where(a > b, a, b) + where(a >= b, a, b));
  const tensor<bool, shape<rows, cols>> equal = eval(a == b), unequal = eval(a != b);
  const auto reduced = eval(sum<cols>(a) + max<cols>(b) + mean<cols>(a));
  const auto broadcast_rows = eval(a + broadcast<shape<rows, cols>>(row, a.extents()));
  const auto first_rows = eval(slice<rows>(a, 1, 2));
  const auto product = eval(contract<inner>(x, w));
  const auto wide = eval(cast<float>(arithmetic) + cast<float>(functions) + cast<float>(extremes) +
                         cast<float>(compared) + cast<float>(broadcast_rows) + cast<float>(product));
  return float(reduced.data()[0]) + float(first_rows.data()[0]) + wide.data()[0] + float(equal.data()[0]) +
         float(unequal.data()[0]);
}

template <class P, class C>
double train_step(nn::transformer<P, C>& model, train::adam<float>& adam, train::loss_scaler* scaler,
                  nn::attention_path path) {
  const tensor<nn::token, shape<nn::batch, nn::src>> source(2, 5);
  const tensor<nn::token, shape<nn::batch, nn::tgt>> input(2, 4), output(2, 4);
  auto list = model.parameters();
  list.zero_grad();
  grad::tape tape;
  random_stream dropout(1);
  nn::context ctx{&tape, &dropout};
  ctx.path = path;
  const auto logits = model(ctx, source, input);
  const auto loss = train::cross_entropy(&tape, logits, output, 0.1, nn::token{0});
  grad::backward(tape, grad::scale(&tape, loss.loss, float(scaler ? scaler->scale() : 1.0)));
  if (scaler) {
    const bool finite = std::isfinite(scaler->unscale(list, 0));
    scaler->update(finite);
    if (!finite) return loss.nll;
  }
  train::clip_gradient_norm(list, 1.0);
  adam.step(1e-3);
  return loss.nll;
}

}  // namespace

int main() {
  const float checked = expressions<float>() + expressions<bfloat16>();
  nn::transformer<float, any_attention> model(32, 1);
  auto list = model.parameters();
  train::adam<float> adam(list);
  double nll = train_step(model, adam, nullptr, nn::attention_path::fused);
  nll += train_step(model, adam, nullptr, nn::attention_path::unfused);

  nn::transformer<nn::precision<bfloat16, float>, small> narrow(32, 1);
  auto narrow_list = narrow.parameters();
  train::adam<float> narrow_adam(narrow_list);
  train::loss_scaler scaler;
  nll += train_step(narrow, narrow_adam, &scaler, nn::attention_path::automatic);

  const std::vector<std::vector<decode::token>> sources{{5, 6, 7}, {8, 9}};
  const std::vector<index_t> lengths{3, 2};
  decode::search_options options;
  decode::kv_cache_decoder<float, any_attention> beam(model, sources, 3), greedy(model, sources, 3);
  const auto translations = decode::beam_search(beam, lengths, options);
  const auto greedy_translations = decode::greedy_search(greedy, lengths, options);
  std::printf("%g %g %zu %zu\n", double(checked), nll, translations.size(), greedy_translations.size());
}
