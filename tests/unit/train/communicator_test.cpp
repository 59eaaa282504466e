// Gradient buckets against a recording communicator that stands for identical processes.
#include <doctest/doctest.h>

#include <attn/cpu.hpp>
#include <attn/grad/parameter.hpp>
#include <attn/train/clip.hpp>
#include <attn/train/communicator.hpp>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

using namespace attn;

namespace {

using row = dim<"row">;
using col = dim<"col">;

/// `processes` processes holding the same values: every sum multiplies by their number. A sum
/// that is started is only done at wait_all(), as a real one may be: whoever reads the values
/// before then sees them unsummed.
class identical_processes final : public train::communicator {
 public:
  explicit identical_processes(int processes) : processes_(processes) {}
  int rank() const override { return 0; }
  int size() const override { return processes_; }
  void all_reduce_sum(std::span<float> values) override {
    messages.push_back(values.size());
    for (float& v : values) v *= float(processes_);
  }
  void all_reduce_sum(std::span<double> values) override {
    messages.push_back(values.size());
    for (double& v : values) v *= processes_;
  }
  void start_all_reduce_sum(std::span<float> values) override {
    messages.push_back(values.size());
    started.push_back(values);
  }
  void wait_all() override {
    for (auto values : started)
      for (float& v : values) v *= float(processes_);
    started.clear();
  }
  void barrier() override {}
  [[noreturn]] void abort(int status) noexcept override { std::exit(status); }
  std::vector<std::size_t> messages;
  std::vector<std::span<float>> started;

 private:
  int processes_;
};

struct three_parameters {
  grad::parameter<float, shape<row, col>> small{extents<shape<row, col>>(2, 3)};
  grad::parameter<float, shape<row>> tiny{extents<shape<row>>(1)};
  grad::parameter<float, shape<row, col>> large{extents<shape<row, col>>(40, 10)};
  grad::parameter_list<float> list;
  three_parameters() {
    list.add("small", small);
    list.add("tiny", tiny);
    list.add("large", large);
    float next = 1;
    for (auto& p : list.refs())
      for (index_t i = 0; i < p.size; ++i) p.grad[i] = next++;
  }
};

}  // namespace

TEST_CASE("train: gradient buckets sum every gradient once, small parameters packed, large ones in place") {
  three_parameters model;
  // 64 bytes hold 16 floats: "small" (6) and "tiny" (1) share a bucket; "large" (400) has one
  // of its own, reduced in place.
  train::gradient_buckets<float> packed(model.list, 64);
  CHECK(packed.bucket_count() == 2);
  identical_processes two(2);
  packed.all_reduce(two);
  CHECK(two.messages == std::vector<std::size_t>{7, 400});
  float expected = 1;
  for (const auto& p : model.list.refs())
    for (index_t i = 0; i < p.size; ++i) CHECK(p.grad[i] == 2 * expected++);

  // 16 bytes hold 4 floats: "small" fills a bucket alone, then "tiny", then "large".
  train::gradient_buckets<float> separate(model.list, 16);
  CHECK(separate.bucket_count() == 3);
  identical_processes three(3);
  separate.all_reduce(three);
  CHECK(three.messages == std::vector<std::size_t>{6, 1, 400});
  expected = 1;
  for (const auto& p : model.list.refs())
    for (index_t i = 0; i < p.size; ++i) CHECK(p.grad[i] == 6 * expected++);
}

TEST_CASE("train: a bucket's sum starts as soon as its last parameter's gradient is complete") {
  three_parameters model;
  train::gradient_buckets<float> packed(model.list, 64);  // {small, tiny}, {large}
  identical_processes two(2);
  packed.begin(two);
  packed.complete(model.small.identity());
  CHECK(two.messages.empty());  // "tiny" is not complete yet
  packed.complete(model.large.identity());
  CHECK(two.messages == std::vector<std::size_t>{400});
  packed.complete(&model);  // not a parameter of the list: ignored
  packed.complete(model.tiny.identity());
  CHECK(two.messages == std::vector<std::size_t>{400, 7});
  CHECK(packed.started_early() == 2);
  CHECK(model.list.refs()[2].grad[0] == 8);  // not summed before finish()
  packed.finish();
  float expected = 1;
  for (const auto& p : model.list.refs())
    for (index_t i = 0; i < p.size; ++i) CHECK(p.grad[i] == 2 * expected++);

  // Parameters never reported complete are summed by finish().
  three_parameters other;
  packed = train::gradient_buckets<float>(other.list, 64);
  identical_processes three(3);
  packed.begin(three);
  packed.complete(other.large.identity());
  packed.finish();
  CHECK(three.messages == std::vector<std::size_t>{400, 7});
  CHECK(packed.started_early() == 1);
  expected = 1;
  for (const auto& p : other.list.refs())
    for (index_t i = 0; i < p.size; ++i) CHECK(p.grad[i] == 3 * expected++);
}

TEST_CASE("train: one process sends nothing") {
  three_parameters model;
  train::gradient_buckets<float> buckets(model.list);
  train::single_process one;
  buckets.all_reduce(one);
  CHECK(model.list.refs()[2].grad[399] == 407);
}

TEST_CASE("train: gradient norm and clipping") {
  three_parameters model;
  const double squares = 407.0 * 408.0 * 815.0 / 6.0;  // 1² + … + 407²
  CHECK(train::gradient_norm(model.list) == doctest::Approx(std::sqrt(squares)).epsilon(1e-12));
  const double before = train::clip_gradient_norm(model.list, 1.0);
  CHECK(before == doctest::Approx(std::sqrt(squares)).epsilon(1e-12));
  CHECK(train::gradient_norm(model.list) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(train::clip_gradient_norm(model.list, 10.0) == doctest::Approx(1.0).epsilon(1e-6));  // under: unchanged
  CHECK(train::gradient_norm(model.list) == doctest::Approx(1.0).epsilon(1e-6));
  model.list.refs()[1].grad[0] = std::nanf("");
  CHECK(std::isnan(train::clip_gradient_norm(model.list, 1.0)));
}
