// Tests of include/attn/train/loss_scale.hpp: the scale's schedule (halved on an overflow,
// doubled after a run of finite steps, powers of two within bounds), unscaling and clipping in
// one pass, and an overflow leaving the gradients as they were.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <attn/attn.hpp>
#include <attn/train/loss_scale.hpp>

namespace {

using namespace attn;
using elements = dim<"elements">;

/// Two parameters with the given gradients.
struct two_parameters {
  grad::parameter<float, shape<elements>> a{extents<shape<elements>>(3)}, b{extents<shape<elements>>(2)};
  grad::parameter_list<float> list;
  two_parameters(std::vector<float> ga, std::vector<float> gb) {
    list.add("a", a);
    list.add("b", b);
    list.zero_grad();
    std::copy(ga.begin(), ga.end(), a.grad().data());
    std::copy(gb.begin(), gb.end(), b.grad().data());
  }
};

}  // namespace

TEST_CASE("train: the loss scale is a power of two, halves on an overflow and doubles after a run of finite steps") {
  train::loss_scaler scaler({.initial = 50000, .growth_interval = 3});
  CHECK(scaler.scale() == 65536);  // 50000 rounded to 2¹⁶
  CHECK(scaler.update(false));
  CHECK(scaler.scale() == 32768);
  CHECK(scaler.state().overflows == 1);
  CHECK(!scaler.update(true));
  CHECK(!scaler.update(true));
  CHECK(scaler.update(true));  // the third in a row
  CHECK(scaler.scale() == 65536);
  CHECK(scaler.state().finite_steps == 0);
  scaler.update(true);
  scaler.update(true);
  scaler.update(false);  // an overflow starts the count again
  scaler.update(true);
  scaler.update(true);
  CHECK(scaler.scale() == 32768);
  CHECK(scaler.state().overflows == 2);

  train::loss_scaler tiny({.initial = 1e-30, .growth_interval = 1});
  CHECK(tiny.scale() == train::smallest_loss_scale);
  CHECK(tiny.at_smallest());
  CHECK(!tiny.update(false));
  CHECK(tiny.scale() == train::smallest_loss_scale);
  CHECK_THROWS_AS(train::loss_scaler({.initial = 0}), std::invalid_argument);
  CHECK_THROWS_AS(train::loss_scaler({.initial = 8, .growth_interval = 0}), std::invalid_argument);

  train::loss_scaler restored;
  restored.restore({.scale = 128, .finite_steps = 7, .overflows = 3});
  CHECK(restored.scale() == 128);
  CHECK(restored.state().finite_steps == 7);
  CHECK(restored.state().overflows == 3);
  restored.restore({});  // a checkpoint of a run without scaling keeps the scaler's own
  CHECK(restored.scale() == 128);
}

TEST_CASE("train: unscaling divides the gradients exactly and clips them in the same pass") {
  train::loss_scaler scaler({.initial = 1024});
  two_parameters p({3 * 1024.f, 0.f, -4 * 1024.f}, {0.5f, 1e-3f});
  const double norm = scaler.unscale(p.list, 0);
  CHECK(norm == doctest::Approx(std::sqrt(9.0 + 16.0 + (0.25 + 1e-6) / (1024.0 * 1024.0))));
  CHECK(p.a.grad().data()[0] == 3.f);  // exact: a power of two
  CHECK(p.a.grad().data()[2] == -4.f);
  CHECK(p.b.grad().data()[1] == 1e-3f / 1024);

  two_parameters clipped({3 * 1024.f, 0.f, -4 * 1024.f}, {0.f, 0.f});
  CHECK(scaler.unscale(clipped.list, 1.0) == doctest::Approx(5.0));
  CHECK(clipped.a.grad().data()[0] == doctest::Approx(0.6).epsilon(1e-6));
  CHECK(clipped.a.grad().data()[2] == doctest::Approx(-0.8).epsilon(1e-6));

  for (const float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    two_parameters overflowed({1.f, bad, 2.f}, {3.f, 4.f});
    CHECK(!std::isfinite(scaler.unscale(overflowed.list, 1.0)));
    CHECK(overflowed.a.grad().data()[0] == 1.f);  // left as they were
    CHECK(overflowed.b.grad().data()[1] == 4.f);
  }
}
