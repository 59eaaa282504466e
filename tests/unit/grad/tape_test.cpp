// grad::tape: steps replayed last first, and a noted variable reported complete as soon as
// every step that can add to its gradient has run.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <attn/grad.hpp>

#include "../reference.hpp"
#include "gradcheck.hpp"

namespace {
using namespace attn;
using n = dim<"n">;
}  // namespace

TEST_CASE("grad: the tape replays its steps last first and reports each note once every later step has run") {
  grad::tape tape;
  std::vector<std::string> events;
  int a = 0, b = 0, c = 0, never = 0;
  tape.record([&] { events.push_back("step 0"); });
  tape.note_read(&a);  // read by steps 1 and 2
  tape.record([&] { events.push_back("step 1"); });
  tape.note_read(&b);  // read by step 2 only
  tape.note_read(&a);  // a second note of a: only the first counts
  tape.record([&] { events.push_back("step 2"); });
  tape.note_read(&c);  // read by no step
  tape.replay([&](const void* key) {
    events.push_back(key == &a ? "a" : key == &b ? "b" : key == &c ? "c" : key == &never ? "never" : "?");
  });
  CHECK(events == std::vector<std::string>{"c", "step 2", "b", "step 1", "a", "step 0"});
  CHECK(tape.size() == 0);
  events.clear();
  tape.record([&] { events.push_back("again"); });
  tape.replay([&](const void*) { events.push_back("stale note"); });  // replay forgot the notes
  CHECK(events == std::vector<std::string>{"again"});
}

TEST_CASE("grad: a step may hold what cannot be copied, and lets go of it once it has run or is forgotten") {
  grad::tape tape;
  int runs = 0;
  const auto held = std::make_shared<int>(7);
  std::vector<long> held_during;
  tape.record([&, kept = std::make_unique<std::shared_ptr<int>>(held)] {  // runs last
    held_during.push_back(held.use_count());  // itself and `held`: the step below is gone
    runs += **kept;
  });
  tape.record([&, kept = std::make_unique<std::shared_ptr<int>>(held)] {  // runs first
    held_during.push_back(held.use_count());  // both steps and `held`
    runs += 10 * **kept;
  });
  CHECK(held.use_count() == 3);
  tape.replay();
  CHECK(runs == 77);
  CHECK(held_during == std::vector<long>{3, 2});
  CHECK(held.use_count() == 1);
  tape.record([kept = std::make_unique<std::shared_ptr<int>>(held)] { FAIL("a cleared step ran"); });
  CHECK(held.use_count() == 2);
  tape.clear();
  CHECK(held.use_count() == 1);
}

TEST_CASE("grad: a backward step is moved, never copied, and refuses to run once emptied") {
  static_assert(!std::is_copy_constructible_v<grad::backward_step>);
  static_assert(std::is_nothrow_move_constructible_v<grad::backward_step>);
  int runs = 0;
  grad::backward_step step([&] { ++runs; });
  grad::backward_step moved(std::move(step));
  moved();
  CHECK(runs == 1);
  CHECK_THROWS_AS(step(), std::logic_error);  // moved from
  moved.reset();
  CHECK_THROWS_WITH_AS(moved(), doctest::Contains("ran after it was run or cleared"), std::logic_error);
  step = grad::backward_step([&] { runs += 10; });
  step();
  CHECK(runs == 11);
}

TEST_CASE("grad: a parameter read twice through cast is complete only after both reads' steps") {
  // y = Σ r ⊙ (w ⊙ x) + Σ s ⊙ w, w read through grad::cast at both places (as modules read
  // their parameters): when the backward pass reports w complete, its gradient is already final.
  grad::parameter<double, shape<n>> w(extents<shape<n>>(9));
  auto x = test::random_input<shape<n>>(9);
  tensor<double, shape<n>> r(9), s(9);
  test::fill_random(r);
  test::fill_random(s);
  test::fill_random(w.value());
  grad::tape tape;
  const auto first = grad::map(&tape, [](const auto& a, const auto& b) { return a * b; }, grad::cast<double>(&tape, w), x);
  const auto loss = grad::add(&tape, test::weighted_sum(&tape, first, r),
                              test::weighted_sum(&tape, grad::cast<double>(&tape, w), s));
  std::vector<double> at_completion;
  int reports = 0;
  grad::backward(tape, loss, [&](const void* key) {
    if (key != w.identity()) return;
    ++reports;
    at_completion.assign(w.grad().data(), w.grad().data() + 9);
  });
  CHECK(reports == 1);
  REQUIRE(at_completion.size() == 9);
  for (index_t i = 0; i < 9; ++i) {
    INFO("i = " << i);
    CHECK(at_completion[std::size_t(i)] == w.grad()(i));
    CHECK(w.grad()(i) == doctest::Approx(r(i) * x.value()(i) + s(i)).epsilon(1e-14));
  }
}

TEST_CASE("grad: the backward pass frees each step's activations and its result's gradient once the step has run") {
  // Eight ReLUs in a row, each keeping its output for its mask: the forward pass leaves eight
  // values on the tape. Replayed, each step lets go of its value and of the gradient it read,
  // so the pass never holds more than two gradients of the chain at once (not all eight).
  using host = memory<cpu>;
  constexpr index_t count = 1024;  // under the block cache's 64 KiB: each tensor its own size
  const std::size_t block = host::rounded(count * sizeof(float)) + host::alignment;
  tensor<float, shape<n>> ones(count);
  ones = fill<float, cpu>(ones.extents(), 1.0f);
  grad::variable<float, shape<n>> x(std::move(ones), true);
  grad::tape tape;
  const std::size_t start = host::used_bytes();
  grad::variable<float, shape<>> loss = [&] {
    auto y = grad::relu(&tape, grad::scale(&tape, x, 2.0f));
    for (int i = 1; i < 8; ++i) y = grad::relu(&tape, y);
    return grad::sum<n>(&tape, y);
  }();
  const std::size_t after_forward = host::used_bytes();
  CHECK(after_forward - start >= 8 * block);
  host::reset_peak();
  grad::backward(tape, loss);
  CHECK(host::peak_bytes() - after_forward <= 2 * block + host::alignment * 4);
  const std::size_t scalar = host::rounded(sizeof(float)) + host::alignment;
  CHECK(host::used_bytes() - start == block + 2 * scalar);  // x's gradient; the loss's value and gradient
  CHECK(x.grad()(3) == 2.0f);
}
