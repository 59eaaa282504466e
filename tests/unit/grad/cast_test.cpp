// grad::cast: a conversion of element type whose gradient comes back converted.
#include <doctest/doctest.h>

#include <attn/grad.hpp>

#include "../reference.hpp"
#include "gradcheck.hpp"

namespace {
using namespace attn;
using n = dim<"n">;
}  // namespace

TEST_CASE("grad: cast converts the value and brings the gradient back in the source's type") {
  auto x = test::random_input<shape<n>>(37);
  grad::tape tape;
  const auto narrow = grad::cast<float>(&tape, x);
  static_assert(std::same_as<decltype(narrow), const grad::variable<float, shape<n>>>);
  tensor<float, shape<n>> r(37);
  test::fill_random(r);
  grad::backward(tape, test::weighted_sum(&tape, narrow, r));
  for (index_t i = 0; i < 37; ++i) {
    INFO("i = " << i);
    CHECK(narrow.value()(i) == static_cast<float>(x.value()(i)));
    CHECK(x.grad()(i) == double(r(i)));  // d(Σ r·float(x))/dx, each term converted exactly
  }
}

TEST_CASE("grad: a cast to the same type is the variable itself, and records nothing") {
  auto x = test::random_input<shape<n>>(5);
  grad::tape tape;
  const auto same = grad::cast<double>(&tape, x);
  CHECK(same.same_as(x));
  CHECK(tape.size() == 0);
}
