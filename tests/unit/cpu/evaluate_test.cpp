// Tests of include/attn/cpu/evaluate.hpp, threads.hpp and contract.hpp: the same results on
// 1, 2 and 3 threads for outputs large enough to be split, on every split axis.
#include <doctest/doctest.h>

#include <atomic>
#include <vector>

#include "../reference.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {
using namespace attn::test;
using batch = attn::dim<"batch">;
using heads = attn::dim<"heads", 4>;
using len = attn::dim<"len">;
using len_k = attn::dim<"len_k">;
using d_k = attn::dim<"d_k", 16>;

struct thread_count {
  explicit thread_count(int n) {
#ifdef _OPENMP
    saved = omp_get_max_threads();
    omp_set_num_threads(n);
#else
    (void)n;
#endif
  }
  ~thread_count() {
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
  }
  int saved = 1;
};

/// Attention-like work whose outputs are large enough to be shared between threads.
std::vector<std::vector<float>> run(attn::index_t b, attn::index_t n) {
  attn::tensor<float, attn::shape<batch, len, heads, d_k>> x(b, n);
  std::mt19937 local(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (attn::index_t i = 0; i < x.size(); ++i) x.data()[i] = dist(local);
  auto q = attn::eval(attn::permute<batch, heads, len, d_k>(x));
  auto scores = attn::eval(attn::contract<d_k>(q, attn::rename<len, len_k>(q)));
  auto shifted = attn::eval(attn::exp(scores - attn::broadcast_like(attn::max<len_k>(scores), scores)));
  auto column = attn::eval(attn::sum<len>(shifted));
  auto out = attn::eval(attn::contract<len_k>(shifted, attn::rename<len, len_k>(q)));
  auto to_vector = [](const auto& t) { return std::vector<float>(t.data(), t.data() + t.size()); };
  return {to_vector(q), to_vector(scores), to_vector(shifted), to_vector(column), to_vector(out)};
}
}  // namespace

TEST_CASE("results do not depend on the number of threads") {
  // batch 1 makes the split fall on a later axis; batch 5 on the first.
  for (attn::index_t b : {1, 5}) {
    CAPTURE(b);
    std::vector<std::vector<float>> one, two, three;
    {
      thread_count t(1);
      one = run(b, 67);
    }
    {
      thread_count t(2);
      two = run(b, 67);
    }
    {
      thread_count t(3);
      three = run(b, 67);
    }
    for (std::size_t i = 0; i < one.size(); ++i) {
      CAPTURE(i);
      std::vector<double> ref(one[i].begin(), one[i].end());
      CHECK(relative_error(two[i].data(), ref) < 1e-6);
      CHECK(relative_error(three[i].data(), ref) < 1e-6);
    }
  }
}

TEST_CASE("parallel_for covers the range once, in grain-aligned pieces") {
  thread_count t(3);
  std::vector<int> hits(1000, 0);
  std::atomic<int> misaligned{0};  // doctest's assertions are not for other threads
  attn::cpu_backend::parallel_for(1000, 8, 1, [&](attn::index_t begin, attn::index_t end) {
    if (begin % 8 != 0) ++misaligned;
    for (attn::index_t i = begin; i < end; ++i) ++hits[static_cast<std::size_t>(i)];
  });
  CHECK(misaligned == 0);
  for (int h : hits) CHECK(h == 1);
  attn::index_t calls = 0;
  attn::cpu_backend::parallel_for(0, 1, 1, [&](attn::index_t begin, attn::index_t end) {
    calls += end - begin;
  });
  CHECK(calls == 0);
}
