// A few training steps of a small Transformer (forward, label-smoothed loss, backward, Adam,
// dropout on), written once over the device: model_step_cpu.cpp instantiates it for the CPU
// (g++, Eigen), model_test.cu for the GPU (nvcc), and the test compares the two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <attn/core.hpp>
#include <attn/decode/kv_cache.hpp>
#include <attn/nn.hpp>
#include <attn/train/adam.hpp>
#include <attn/train/loss.hpp>

namespace model_step {

/// Two layers, d_model 32, 4 heads, d_ff 64.
struct small_config : attn::nn::config<attn::nn::widths<32, 64, 4, 8, 8>, 2> {};

struct result {
  std::vector<double> losses;       // the loss of every step
  std::vector<float> parameters;    // every parameter after the last step, in list order
  std::vector<std::string> names;   // each parameter's name, one per element of `parameters`
  std::vector<float> first_logits;  // the first step's logits
};

/// `steps` steps on fixed batches of a 23-token vocabulary (token 0 padding), from seed 7,
/// computing in Activation (float, bfloat16 or float16) over float parameters;
/// `after_step(step)` is called after each, when given.
template <class Device, class Activation = float>
result train(int steps, double dropout, void (*after_step)(int) = nullptr) {
  using namespace attn;
  using nn::batch, nn::src, nn::tgt, nn::token;
  nn::hyperparameters h = nn::defaults<small_config>();
  h.dropout = dropout;
  nn::transformer<nn::precision<Activation, float>, small_config, Device> model(23, 7, 0, h);
  auto parameters = model.parameters();
  train::adam<float, Device> optimizer(parameters);
  tensor<token, shape<batch, src>> source(3, 6);
  tensor<token, shape<batch, tgt>> input(3, 5), output(3, 5);
  for (index_t b = 0; b < 3; ++b) {
    for (index_t i = 0; i < 6; ++i) source(b, i) = i < 6 - b ? token(1 + (b * 7 + i * 3) % 22) : 0;
    for (index_t i = 0; i < 5; ++i) {
      input(b, i) = i == 0 ? 1 : token(1 + (b * 5 + i * 11) % 22);
      output(b, i) = i < 5 - b ? token(1 + (b * 5 + (i + 1) * 11) % 22) : 0;
    }
  }
  const auto device_source = to_device<Device>(source);
  const auto device_input = to_device<Device>(input);
  const auto device_output = to_device<Device>(output);
  result r;
  random_stream dropout_numbers(11);
  for (int step = 1; step <= steps; ++step) {
    grad::tape tape;
    nn::context ctx{&tape, &dropout_numbers, nullptr};
    const auto logits = model(ctx, device_source, device_input);
    if (step == 1) {
      const auto host = to_host(logits.value());
      for (index_t i = 0; i < host.size(); ++i) r.first_logits.push_back(float(host.data()[i]));
    }
    const auto loss = train::cross_entropy(&tape, logits, device_output, 0.1, token{0});
    r.losses.push_back(loss.smoothed / double(loss.tokens));
    grad::backward(tape, loss.loss);
    optimizer.step(train::noam_rate(32, step, 4));
    parameters.zero_grad();
    if (after_step != nullptr) after_step(step);
  }
  for (const auto& p : parameters.refs()) {
    std::vector<float> host(static_cast<std::size_t>(p.size));
    memory<Device>::copy_to_host(host.data(), p.value, host.size() * sizeof(float));
    r.parameters.insert(r.parameters.end(), host.begin(), host.end());
    r.names.insert(r.names.end(), host.size(), p.name);
  }
  return r;
}

/// `steps` steps of the key/value-cache decoder over three sources with the untrained model of
/// seed 7, fed fixed tokens (not its own choices, which near-ties could make differ between
/// devices); returns every step's log-probabilities, and calls `after_step(step)` after each.
template <class Device>
std::vector<float> decode(int steps, void (*after_step)(int) = nullptr) {
  using namespace attn;
  nn::transformer<float, small_config, Device> model(23, 7, 0, nn::defaults<small_config>());
  const std::vector<std::vector<nn::token>> sources = {{3, 4, 5, 6}, {7, 8}, {9, 10, 11, 12, 13, 14, 15}};
  decode::kv_cache_decoder<float, small_config, Device> decoder(model, sources, nn::token{2});
  std::vector<nn::token> last(sources.size(), nn::token{1});
  std::vector<float> log_probs, all;
  for (int step = 1; step <= steps; ++step) {
    decoder.score(last, log_probs);
    all.insert(all.end(), log_probs.begin(), log_probs.end());
    for (std::size_t row = 0; row < last.size(); ++row) last[row] = nn::token(1 + (step * 7 + int(row) * 3) % 22);
    if (after_step != nullptr) after_step(step);
  }
  return all;
}

}  // namespace model_step
