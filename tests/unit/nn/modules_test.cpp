// Gradient checks of every module and of the whole model (double, masks on, dropout off).
#include <doctest/doctest.h>

#include <attn/nn.hpp>
#include <attn/train/loss.hpp>

#include "../grad/gradcheck.hpp"
#include "micro.hpp"

// Its own namespace: unit-model compiles its files together (tests/unit/meson.build).
namespace nn_modules_test {

namespace {

using namespace attn;
using nn::batch;
using nn::src;
using nn::tgt;
using test::micro;
using d_model = micro::d_model;
using test::random_input;

template <class Module>
std::vector<test::gradient_target> parameter_targets(Module& m, grad::parameter_list<double>& list) {
  m.collect(list);
  return test::targets(list);
}

/// Random values in every parameter (LayerNorm gains and biases included), so that no
/// gradient is checked only at a special point.
inline void randomise(grad::parameter_list<double>& list) {
  for (auto& p : list)
    for (index_t i = 0; i < p.size; ++i) p.value[i] = std::uniform_real_distribution<double>(-0.8, 0.8)(test::rng());
}

constexpr double tolerance = 1e-6;

}  // namespace

TEST_CASE("nn: multi-head attention (self and encoder-decoder, with masks) passes gradient checks") {
  random_stream init(1);
  nn::multi_head_attention<double, micro> attention(init);
  grad::parameter_list<double> list;
  auto targets = parameter_targets(attention, list);
  auto x = random_input<shape<batch, tgt, d_model>>(2, 3);
  auto memory = random_input<shape<batch, src, d_model>>(2, 4);
  targets.push_back(test::target("x", x));
  targets.push_back(test::target("memory", memory));
  const auto source = test::tokens<src>(2, 4, {5, 6, 7, 0, 5, 0, 0, 0});
  const auto target = test::tokens<tgt>(2, 3, {1, 2, 3, 1, 2, 0});
  const auto cross_mask = nn::padding_mask<double, tgt>(source, 3, 0);
  const auto causal = nn::causal_mask<double, tgt>(target, 0);
  tensor<double, shape<batch, tgt, d_model>> r(2, 3);
  test::fill_random(r);
  auto loss_of = [&](grad::tape* t) {
    nn::context ctx{t, nullptr};
    auto h = attention(ctx, x, x, causal);
    return test::weighted_sum(t, attention(ctx, h, memory, cross_mask), r);
  };
  const auto report = test::check_gradients(loss_of, targets);
  INFO(report.where);
  CHECK(report.worst < tolerance);
}

TEST_CASE("nn: feed-forward and layer norm modules pass gradient checks") {
  random_stream init(2);
  nn::feed_forward<double, micro> ffn(init);
  nn::layer_norm<double, d_model> norm;
  grad::parameter_list<double> list;
  list.add_module("ffn", ffn);
  list.add_module("norm", norm);
  randomise(list);
  auto targets = test::targets(list);
  auto x = random_input<shape<batch, src, d_model>>(3, 2);
  targets.push_back(test::target("x", x));
  const auto r = test::random_like(x);
  const auto report = test::check_gradients(
      [&](grad::tape* t) {
        nn::context ctx{t, nullptr};
        return test::weighted_sum(t, norm(ctx, ffn(ctx, x)), r);
      },
      targets);
  INFO(report.where);
  CHECK(report.worst < tolerance);
}

TEST_CASE_TEMPLATE("nn: encoder and decoder layers pass gradient checks", C, test::micro, test::micro_pre_norm) {
  random_stream init(3);
  nn::encoder_layer<double, C> encoder(init, nn::defaults<C>());
  nn::decoder_layer<double, C> decoder(init, nn::defaults<C>());
  grad::parameter_list<double> list;
  list.add_module("encoder", encoder);
  list.add_module("decoder", decoder);
  randomise(list);
  auto targets = test::targets(list);
  auto x = random_input<shape<batch, src, d_model>>(2, 4);
  auto y = random_input<shape<batch, tgt, d_model>>(2, 3);
  targets.push_back(test::target("x", x));
  targets.push_back(test::target("y", y));
  const auto source = test::tokens<src>(2, 4, {5, 6, 7, 8, 5, 6, 0, 0});
  const auto target = test::tokens<tgt>(2, 3, {1, 2, 3, 1, 0, 0});
  const auto self_mask = nn::padding_mask<double, src>(source, 4, 0);
  const auto cross_mask = nn::padding_mask<double, tgt>(source, 3, 0);
  const auto causal = nn::causal_mask<double, tgt>(target, 0);
  const auto r = test::random_like(y);
  auto loss_of = [&](grad::tape* t) {
    nn::context ctx{t, nullptr};
    auto memory = encoder(ctx, x, self_mask);
    return test::weighted_sum(t, decoder(ctx, y, memory, causal, cross_mask), r);
  };
  const auto report = test::check_gradients(loss_of, targets, 24);
  INFO(report.where);
  CHECK(report.worst < tolerance);
}

TEST_CASE_TEMPLATE("nn: the whole model passes gradient checks through its loss", C, test::micro,
                   test::micro_pre_norm, test::micro_learned_untied) {
  nn::transformer<double, C> model(11, 5);
  auto list = model.parameters();
  randomise(list);
  const auto targets = test::targets(list);
  const auto source = test::tokens<src>(2, 4, {5, 6, 7, 2, 9, 3, 2, 0});
  const auto input = test::tokens<tgt>(2, 3, {1, 4, 8, 1, 10, 0});
  const auto output = test::tokens<tgt>(2, 3, {4, 8, 2, 10, 2, 0});
  auto loss_of = [&](grad::tape* t) {
    const auto logits = model(nn::context{t, nullptr}, source, input);
    return train::cross_entropy(t, logits, output, 0.1, nn::token{0}).loss;
  };
  const auto report = test::check_gradients(loss_of, targets, 12);
  INFO(report.where);
  CHECK(report.worst < tolerance);
  CHECK(report.checked > 300);
}

TEST_CASE_TEMPLATE("nn: the whole model with fused attention passes gradient checks and equals the unfused one", C,
                   test::micro, test::micro_alibi) {  // ALiBi: learned slopes, modified inside the kernel
  nn::transformer<double, C> model(11, 5);
  auto list = model.parameters();
  randomise(list);
  const auto source = test::tokens<src>(2, 4, {5, 6, 7, 2, 9, 3, 2, 0});
  const auto input = test::tokens<tgt>(2, 3, {1, 4, 8, 1, 10, 0});
  const auto output = test::tokens<tgt>(2, 3, {4, 8, 2, 10, 2, 0});
  const auto loss_with = [&](nn::attention_path path) {
    return [&, path](grad::tape* t) {
      const auto logits = model(nn::context{t, nullptr, nullptr, path}, source, input);
      return train::cross_entropy(t, logits, output, 0.1, nn::token{0}).loss;
    };
  };
  const auto report = test::check_gradients(loss_with(nn::attention_path::fused), test::targets(list), 12);
  INFO(report.where);
  CHECK(report.worst < tolerance);

  // One backward pass each way: the same loss and the same gradient of every parameter.
  const auto gradients = [&](nn::attention_path path) {
    list.zero_grad();
    grad::tape t;
    const auto loss = loss_with(path)(&t);
    grad::backward(t, loss);
    std::vector<double> all{loss.value().data()[0]};
    for (const auto& p : list.refs()) all.insert(all.end(), p.grad, p.grad + p.size);
    return all;
  };
  const auto fused = gradients(nn::attention_path::fused);
  const auto unfused = gradients(nn::attention_path::unfused);
  CHECK(test::relative_error(fused.data(), unfused) < 1e-12);
}

}  // namespace nn_modules_test
