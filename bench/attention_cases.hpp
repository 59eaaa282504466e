// The attention variants' benchmark cases, templated over the device so that the CPU program
// (bench_attention.cpp) and a GPU one register the same cases. One case: a multi-head
// self-attention layer (projections, the variant's attention, output projection) on one
// sentence of n tokens, forward or forward + backward, with the peak bytes of the tensors it
// allocated beyond its inputs (bytes_peak; a device that cannot say reports none).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <attn/nn.hpp>

#include "bench_common.hpp"

namespace attn_bench {

using namespace attn;

/// The widths of Table 1's comparison at two sizes: d_model 256 (4 heads) and 512 (8 heads), d_k = 64.
struct d256 : nn::config<nn::widths<256, 1024, 4, 64, 64>> {};
struct d512 : nn::config<nn::widths<512, 2048, 8, 64, 64>> {};

/// The restricted variant's neighbourhood in the benchmark (Table 1's r).
inline constexpr const char* restricted_spec = "restricted:64";

/// Peak bytes of live tensors on Device since `reset` (specialised per device; none by default).
template <class Device>
struct peak_memory {
  static constexpr bool known = false;
  static void reset() {}
  static std::size_t bytes() { return 0; }
};
template <>
struct peak_memory<cpu> {
  static constexpr bool known = true;
  static void reset() { memory<cpu>::reset_peak(); }
  static std::size_t bytes() { return memory<cpu>::peak_bytes() - memory<cpu>::used_bytes(); }
};

template <class Device, class C, class Variant>
void attention_layer(benchmark::State& state, std::string spec, bool backward) {
  using A = float;
  using d_model = typename C::d_model;
  using S = shape<nn::batch, nn::src, d_model>;
  const index_t n = state.range(0);
  random_stream init(1);
  nn::multi_head_attention<A, C, Device, Variant> layer(init, nn::attention_kind::encoder_self,
                                                         nn::variant_spec::parse(spec));
  tensor<A, S> host(1, n);
  fill(host.data(), host.size(), 7);
  const auto x = to_device<Device>(host);
  const nn::attention_mask<A, nn::batch, nn::src, Device> mask(1, n, n);  // all visible
  auto parameters = grad::parameter_list<A, Device>{};
  layer.collect(parameters);

  std::size_t peak = 0;
  A last = 0;
  for (auto _ : state) {
    if (peak_memory<Device>::known) peak_memory<Device>::reset();
    if (backward) {
      grad::tape tape;
      grad::variable<A, S, Device> input(x, true);
      auto y = layer(nn::context{&tape}, input, input, mask);
      auto loss = grad::sum<nn::batch>(&tape, grad::sum<nn::src>(&tape, grad::sum<d_model>(&tape, y)));
      grad::backward(tape, loss);
      memory<Device>::copy_to_host(&last, input.grad().data(), sizeof(A));  // waits for the device
    } else {
      grad::variable<A, S, Device> input(x);
      auto y = layer(nn::context{}, input, input, mask);
      memory<Device>::copy_to_host(&last, y.value().data(), sizeof(A));
    }
    peak = std::max(peak, peak_memory<Device>::bytes());
  }
  benchmark::DoNotOptimize(last);
  state.counters["n"] = double(n);
  state.counters["d_model"] = double(d_model::extent);
  if (peak_memory<Device>::known) state.counters["bytes_peak"] = double(peak);
  state.SetLabel(spec);
}

/// Registers variant V (spec its NAME[:ARG]) at n = 64 … max_n for both widths, forward and
/// forward + backward: "attention/<device>/<spec>/d<width>/<fwd|fwd_bwd>/n".
template <class Device, template <class, class, class> class V>
void register_variant(const std::string& device, const std::string& spec, std::int64_t max_n = 4096) {
  const auto add = [&]<class C>(C) {
    for (bool backward : {false, true}) {
      const std::string name = "attention/" + device + "/" + spec + "/d" + std::to_string(C::d_model::extent) +
                               (backward ? "/fwd_bwd" : "/fwd");
      benchmark::RegisterBenchmark(name.c_str(), attention_layer<Device, C, V<float, C, Device>>, spec, backward)
          ->RangeMultiplier(2)
          ->Range(64, max_n)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2)
          ->UseRealTime();
    }
  };
  add(d256{});
  add(d512{});
}

/// Every shipped variant. Additive attention's [heads, n, n, d_k] tensor stops it at n = 512.
template <class Device>
void register_variants(const std::string& device) {
  register_variant<Device, nn::scaled_dot_product>(device, "scaled");
  register_variant<Device, nn::dot_product>(device, "unscaled");
  register_variant<Device, nn::additive>(device, "additive", 512);
  register_variant<Device, nn::restricted>(device, restricted_spec);
  register_variant<Device, nn::multi_query>(device, "mqa");
  register_variant<Device, nn::alibi>(device, "alibi");
}

}  // namespace attn_bench
