// Room for mixed precision (include/attn/nn/precision.hpp): a model whose activations and
// parameters have different element types trains, decodes and keeps its parameters in their
// own type. Float activations over double parameters, the pair this CPU can compute in, stand
// in for bf16 over fp32.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <vector>

#include <attn/attn.hpp>
#include <attn/decode.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/loss.hpp>

#include "micro.hpp"

namespace {

using namespace attn;
using nn::src;
using nn::tgt;

using mixed_model = nn::transformer<nn::precision<float, double>, test::micro>;
using wide_model = nn::transformer<double, test::micro>;

static_assert(std::same_as<mixed_model::activation_type, float>);
static_assert(std::same_as<mixed_model::parameter_type, double>);
static_assert(std::same_as<decltype(std::declval<mixed_model&>().parameters()), grad::parameter_list<double>>);
static_assert(std::same_as<wide_model::activation_type, wide_model::parameter_type>);

const auto source = test::tokens<src>(2, 4, {5, 6, 7, 2, 9, 3, 2, 0});
const auto input = test::tokens<tgt>(2, 3, {1, 4, 8, 1, 10, 0});
const auto output = test::tokens<tgt>(2, 3, {4, 8, 2, 10, 2, 0});

/// One forward and backward pass of the label-smoothed loss; the gradients are left in `list`.
template <class Model>
double loss_and_gradients(Model& model, grad::parameter_list<typename Model::parameter_type>& list) {
  list.zero_grad();
  grad::tape tape;
  const auto logits = model(nn::context{&tape, nullptr}, source, input);
  static_assert(std::same_as<typename std::remove_cvref_t<decltype(logits)>::value_type,
                             typename Model::activation_type>);
  const auto result = train::cross_entropy(&tape, logits, output, 0.1, nn::token{0});
  grad::backward(tape, result.loss);
  return double(result.loss.value().data()[0]);
}

/// max |a − b| over max |b|, over every parameter's gradient.
double gradient_distance(const grad::parameter_list<double>& a, const grad::parameter_list<double>& b) {
  double difference = 0, scale = 0;
  for (std::size_t p = 0; p < b.size(); ++p)
    for (index_t i = 0; i < b.refs()[p].size; ++i) {
      difference = std::max(difference, std::fabs(a.refs()[p].grad[i] - b.refs()[p].grad[i]));
      scale = std::max(scale, std::fabs(b.refs()[p].grad[i]));
    }
  return difference / scale;
}

}  // namespace

TEST_CASE("nn: a model computing in float over double parameters has the double model's gradients to float accuracy") {
  mixed_model mixed(13, 11);
  wide_model wide(13, 11);
  auto mixed_list = mixed.parameters();
  auto wide_list = wide.parameters();
  REQUIRE(mixed_list.size() == wide_list.size());
  for (std::size_t p = 0; p < wide_list.size(); ++p) {  // one seed, one model: drawn in double both times
    const auto& m = mixed_list.refs()[p];
    const auto& w = wide_list.refs()[p];
    CHECK(m.name == w.name);
    CHECK(std::equal(m.value, m.value + m.size, w.value, w.value + w.size));
  }

  const double mixed_loss = loss_and_gradients(mixed, mixed_list);
  const double wide_loss = loss_and_gradients(wide, wide_list);
  CHECK(mixed_loss == doctest::Approx(wide_loss).epsilon(1e-5));
  CHECK(mixed_loss != wide_loss);  // the passes did run in float
  const double distance = gradient_distance(mixed_list, wide_list);
  INFO("gradient distance " << distance);
  CHECK(distance < 1e-4);
  CHECK(distance > 0);
}

TEST_CASE("nn: Adam on double master weights trains the float model along the double model's loss curve") {
  mixed_model mixed(13, 11);
  wide_model wide(13, 11);
  auto mixed_list = mixed.parameters();
  auto wide_list = wide.parameters();
  train::adam<double> mixed_adam(mixed_list), wide_adam(wide_list);
  std::vector<double> mixed_losses, wide_losses;
  for (int step = 0; step < 12; ++step) {
    mixed_losses.push_back(loss_and_gradients(mixed, mixed_list));
    wide_losses.push_back(loss_and_gradients(wide, wide_list));
    mixed_adam.step(3e-3);
    wide_adam.step(3e-3);
  }
  for (std::size_t i = 0; i < wide_losses.size(); ++i) {
    INFO("step " << i);
    CHECK(mixed_losses[i] == doctest::Approx(wide_losses[i]).epsilon(1e-3));
  }
  CHECK(mixed_losses.back() < mixed_losses.front() - 0.1);  // and it learns
}

TEST_CASE("decode: the key/value-cache decoder runs a mixed-precision model in its activation type") {
  const mixed_model mixed(23, 11, 0);
  const wide_model wide(23, 11, 0);
  const std::vector<std::vector<nn::token>> sentences{{5, 6, 7, 8}, {9, 10}};
  decode::kv_cache_decoder<nn::precision<float, double>, test::micro> narrow(mixed, sentences, 3);
  decode::kv_cache_decoder<double, test::micro> exact(wide, sentences, 3);
  std::vector<float> narrow_scores, exact_scores;
  for (const std::vector<nn::token>& last : {std::vector<nn::token>{2, 2}, {7, 4}, {12, 5}}) {
    narrow.score(last, narrow_scores);
    exact.score(last, exact_scores);
    REQUIRE(narrow_scores.size() == exact_scores.size());
    double worst = 0;
    for (std::size_t i = 0; i < exact_scores.size(); ++i)
      worst = std::max(worst, double(std::fabs(narrow_scores[i] - exact_scores[i])));
    CHECK(worst < 1e-4);
  }
}
