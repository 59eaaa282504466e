// Fused attention on the CPU (cpu/fused_attention.hpp) against plain loops over the whole score
// matrix: outputs, log-sum-exps and every input's gradient, with padding, causal masks, a mask
// rule, grouped key/value heads, lengths across tile edges and head dims 32, 64 and 128; the
// backward against central differences of the forward; NaN sentinels around every output.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <attn/cpu/fused_attention.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using namespace attn;

/// Restricted attention's rule (§4): keys within 4 positions of the query.
struct within_four {
  bool operator()(index_t query, index_t key) const { return std::abs(query - key) <= 4; }
};

struct sizes {
  index_t batch, heads, kv_heads, queries, keys, d_k, d_v;
};

fused_attention_problem problem_of(const sizes& z, const std::vector<index_t>* lengths, bool causal,
                                   index_t first_query = 0) {
  fused_attention_problem p;
  p.batch = z.batch, p.heads = z.heads, p.kv_heads = z.kv_heads, p.queries = z.queries, p.keys = z.keys;
  p.d_k = z.d_k, p.d_v = z.d_v;
  p.scale = 1.0 / std::sqrt(double(z.d_k));
  p.key_lengths = lengths ? lengths->data() : nullptr;
  p.causal = causal;
  p.first_query = first_query;
  return p;
}

std::vector<double> random_values(index_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(count));
  for (auto& e : x) e = u(gen);
  return x;
}

/// The inputs, the output gradient, and what each computation gives back.
struct attention_data {
  std::vector<double> q, k, v, d_out;
  std::vector<double> bias = {};  // [batch, queries, keys], or none
};

struct attention_result {
  std::vector<double> out, log_sum_exp, d_q, d_k, d_v;
};

attention_data random_data(const sizes& z, unsigned seed) {
  return {random_values(z.batch * z.heads * z.queries * z.d_k, seed),
          random_values(z.batch * z.kv_heads * z.keys * z.d_k, seed + 1),
          random_values(z.batch * z.kv_heads * z.keys * z.d_v, seed + 2),
          random_values(z.batch * z.heads * z.queries * z.d_v, seed + 3)};
}

/// Eq. (1) over the whole score matrix, forward and backward, in plain loops (double).
template <class Rule>
attention_result reference(const fused_attention_problem& p, const attention_data& x, Rule rule) {
  attention_result r;
  r.out.assign(x.d_out.size(), 0.0);
  r.log_sum_exp.assign(static_cast<std::size_t>(p.batch * p.heads * p.queries), 0.0);
  r.d_q.assign(x.q.size(), 0.0);
  r.d_k.assign(x.k.size(), 0.0);
  r.d_v.assign(x.v.size(), 0.0);
  const auto at = [](index_t i) { return static_cast<std::size_t>(i); };
  for (index_t b = 0; b < p.batch; ++b)
    for (index_t h = 0; h < p.heads; ++h)
      for (index_t i = 0; i < p.queries; ++i) {
        const index_t g = h / (p.heads / p.kv_heads), row = (b * p.heads + h) * p.queries + i;
        const index_t position = p.first_query + i;
        const index_t length = p.key_lengths ? p.key_lengths[b] : p.keys;
        std::vector<index_t> seen;
        std::vector<double> s;
        for (index_t j = 0; j < p.keys; ++j) {
          if (j >= length || (p.causal && j > position) || !rule(position, j)) continue;
          const index_t key_row = (b * p.kv_heads + g) * p.keys + j;
          double dot = 0;
          for (index_t c = 0; c < p.d_k; ++c) dot += x.q[at(row * p.d_k + c)] * x.k[at(key_row * p.d_k + c)];
          seen.push_back(key_row);
          s.push_back(dot * p.scale + (x.bias.empty() ? 0.0 : x.bias[at((b * p.queries + i) * p.keys + j)]));
        }
        if (seen.empty()) {
          r.log_sum_exp[at(row)] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double max = s[0], sum = 0;
        for (double e : s) max = std::max(max, e);
        for (double e : s) sum += std::exp(e - max);
        r.log_sum_exp[at(row)] = max + std::log(sum);
        std::vector<double> probability(s.size()), d_probability(s.size());
        double d_dot = 0;  // Σ_j p_j · dp_j
        for (std::size_t j = 0; j < s.size(); ++j) {
          probability[j] = std::exp(s[j] - r.log_sum_exp[at(row)]);
          for (index_t c = 0; c < p.d_v; ++c) {
            r.out[at(row * p.d_v + c)] += probability[j] * x.v[at(seen[j] * p.d_v + c)];
            r.d_v[at(seen[j] * p.d_v + c)] += probability[j] * x.d_out[at(row * p.d_v + c)];
            d_probability[j] += x.d_out[at(row * p.d_v + c)] * x.v[at(seen[j] * p.d_v + c)];
          }
          d_dot += probability[j] * d_probability[j];
        }
        for (std::size_t j = 0; j < s.size(); ++j) {
          const double d_score = probability[j] * (d_probability[j] - d_dot) * p.scale;
          for (index_t c = 0; c < p.d_k; ++c) {
            r.d_q[at(row * p.d_k + c)] += d_score * x.k[at(seen[j] * p.d_k + c)];
            r.d_k[at(seen[j] * p.d_k + c)] += d_score * x.q[at(row * p.d_k + c)];
          }
        }
      }
  return r;
}

/// Values of type T with `guard` NaNs before and after, which nothing may write.
template <class T>
struct guarded {
  static constexpr std::size_t guard = 8;
  std::vector<T> storage;
  explicit guarded(std::size_t n) : storage(n + 2 * guard, T(std::numeric_limits<accumulate_t<T>>::quiet_NaN())) {}
  guarded(const std::vector<double>& x) : guarded(x.size()) {
    for (std::size_t i = 0; i < x.size(); ++i) storage[guard + i] = T(x[i]);
  }
  T* data() { return storage.data() + guard; }
  std::size_t size() const { return storage.size() - 2 * guard; }
  std::vector<double> values(const std::string& what) const {
    for (std::size_t i = 0; i < guard; ++i) {
      INFO(what);
      CHECK(std::isnan(double(storage[i])));
      CHECK(std::isnan(double(storage[storage.size() - 1 - i])));
    }
    return {storage.begin() + guard, storage.end() - guard};
  }
};

template <class T, class Rule>
attention_result fused(const fused_attention_problem& p, const attention_data& x, Rule rule) {
  guarded<T> q(x.q), k(x.k), v(x.v), d_out(x.d_out);
  guarded<T> out(x.d_out.size());
  guarded<accumulate_t<T>> lse(static_cast<std::size_t>(p.batch * p.heads * p.queries));
  guarded<T> d_q(x.q.size()), d_k(x.k.size()), d_v(x.v.size());
  const T* b = nullptr;
  std::vector<T> bias_values;
  if (x.bias.size()) {
    bias_values.assign(x.bias.begin(), x.bias.end());
    b = bias_values.data();
  }
  fused_attention<cpu>::forward(p, q.data(), k.data(), v.data(), b, out.data(), lse.data(), rule);
  fused_attention<cpu>::backward(p, q.data(), k.data(), v.data(), b, out.data(), d_out.data(), lse.data(), d_q.data(),
                                 d_k.data(), d_v.data(), rule);
  return {out.values("out"), lse.values("log_sum_exp"), d_q.values("d_q"), d_k.values("d_k"), d_v.values("d_v")};
}

/// max |a − b| / (1 + |b|), with −∞ = −∞ and any NaN failing.
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    const double e = std::abs(a[i] - b[i]) / (1 + std::abs(b[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
  }
  return worst;
}

/// The kernel in each of the types `Ts`, to its tolerance, against one reference (the 1000-token
/// case's reference is most of the test's time under the sanitizers).
template <class... Ts, class Rule = every_pair>
void check_against_reference(const fused_attention_problem& p, const attention_data& x,
                             const std::array<double, sizeof...(Ts)>& tolerances, Rule rule = {}) {
  const auto expected = reference(p, x, rule);
  std::size_t t = 0;
  const auto check = [&]<class T>(std::type_identity<T>) {
    const double tolerance = tolerances[t++];
    CAPTURE(tolerance);
    const auto got = fused<T>(p, x, rule);
    CHECK(relative_error(got.out, expected.out) < tolerance);
    CHECK(relative_error(got.log_sum_exp, expected.log_sum_exp) < tolerance);
    CHECK(relative_error(got.d_q, expected.d_q) < tolerance);
    CHECK(relative_error(got.d_k, expected.d_k) < tolerance);
    CHECK(relative_error(got.d_v, expected.d_v) < tolerance);
  };
  (check(std::type_identity<Ts>{}), ...);
}

TEST_CASE("fused attention equals the whole score matrix at lengths across tile edges and head dims 32, 64, 128") {
  for (index_t n : {1, 17, 128, 129, 1000}) {
    for (index_t d : {32, 64, 128}) {
      if (n == 1000 && d != 64) continue;  // one long case: the plain reference is O(n²·d)
      for (bool causal : {false, true}) {
        CAPTURE(n);
        CAPTURE(d);
        CAPTURE(causal);
        const sizes z{n == 1000 ? 1 : 2, 2, 2, n, n, d, d};
        const auto x = random_data(z, unsigned(n * 7 + d));
        const auto p = problem_of(z, nullptr, causal);
        check_against_reference<double, float>(p, x, {1e-12, 2e-5});
      }
    }
  }
}

TEST_CASE("fused attention's backward cuts key tiles into chunks with their own dQ only when the heads are few") {
  // 16 sentences × 4 heads: 64 tasks without cutting, one chunk, dQ gathered in place; one
  // sentence and head of 3 key tiles: 3 chunks, each with its dQ, summed at the end. (Narrow
  // heads: the reference's loops are slow under the sanitizers.)
  for (const sizes z : {sizes{16, 4, 4, 130, 130, 8, 8}, sizes{1, 1, 1, 300, 300, 32, 32}}) {
    for (bool causal : {false, true}) {
      CAPTURE(z.batch);
      CAPTURE(causal);
      const auto x = random_data(z, unsigned(z.batch * 3 + causal));
      const auto p = problem_of(z, nullptr, causal);
      check_against_reference<double, float>(p, x, {1e-12, 2e-5});
    }
  }
}

/// x with every value rounded to T: what a kernel of T reads.
template <class T>
attention_data rounded(attention_data x) {
  for (auto* values : {&x.q, &x.k, &x.v, &x.d_out, &x.bias})
    for (double& e : *values) e = double(T(float(e)));
  return x;
}

TEST_CASE("fused attention takes bfloat16 and float16, accumulates in float and rounds each output once") {
  // The reference runs in double on the rounded inputs, so what is left is the kernel's: its
  // outputs rounded once (half a unit in the last place: 2⁻⁹ of bfloat16's, 2⁻¹² of float16's,
  // relative) and float's sums (~1e-6). The backward also reads the rounded output, whose error
  // enters D = rowsum(dO ⊙ O) and reaches the gradients through dS = P ⊙ (dP − D): measured at
  // most 0.48 of a unit in the last place (2026-11-24), so one unit is allowed.
  const sizes z{2, 4, 2, 129, 129, 64, 64};
  const std::vector<index_t> lengths{129, 50};
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const auto p = problem_of(z, &lengths, causal);
    const auto bf = rounded<bfloat16>(random_data(z, 21));
    const auto bf_expected = reference(p, bf, every_pair{});
    const auto bf_got = fused<bfloat16>(p, bf, every_pair{});
    const double bf_unit = std::ldexp(1.0, -8);  // bfloat16's unit in the last place at 1
    CHECK(relative_error(bf_got.out, bf_expected.out) <= bf_unit / 2 + 1e-6);
    CHECK(relative_error(bf_got.log_sum_exp, bf_expected.log_sum_exp) < 1e-5);  // float, not rounded
    CHECK(relative_error(bf_got.d_q, bf_expected.d_q) <= bf_unit);
    CHECK(relative_error(bf_got.d_k, bf_expected.d_k) <= bf_unit);
    CHECK(relative_error(bf_got.d_v, bf_expected.d_v) <= bf_unit);

    const auto half = rounded<float16>(random_data(z, 22));
    const auto half_expected = reference(p, half, every_pair{});
    const auto half_got = fused<float16>(p, half, every_pair{});
    const double half_unit = std::ldexp(1.0, -11);
    CHECK(relative_error(half_got.out, half_expected.out) <= half_unit / 2 + 1e-6);
    CHECK(relative_error(half_got.log_sum_exp, half_expected.log_sum_exp) < 1e-5);
    CHECK(relative_error(half_got.d_q, half_expected.d_q) <= half_unit);
    CHECK(relative_error(half_got.d_k, half_expected.d_k) <= half_unit);
    CHECK(relative_error(half_got.d_v, half_expected.d_v) <= half_unit);
  }
}

TEST_CASE("fused attention: padding, grouped heads, a decoding step's first query and a mask rule") {
  const sizes z{3, 4, 2, 140, 300, 32, 16};  // 4 query heads on 2 key/value heads; d_v ≠ d_k
  const auto x = random_data(z, 11);
  const std::vector<index_t> lengths{300, 130, 1};
  SUBCASE("padding") { check_against_reference<double>(problem_of(z, &lengths, false), x, {1e-12}); }
  SUBCASE("padding and causal, queries at 80 … 219") {
    check_against_reference<double>(problem_of(z, &lengths, true, 80), x, {1e-12});
  }
  SUBCASE("a mask rule with causal masks: most key tiles are skipped") {
    const sizes self{2, 4, 1, 300, 300, 32, 32};  // multi-query
    const auto y = random_data(self, 12);
    check_against_reference<double>(problem_of(self, nullptr, true), y, {1e-12}, within_four{});
    check_against_reference<double, float>(problem_of(self, nullptr, false), y, {1e-12, 2e-5}, within_four{});
  }
}

TEST_CASE("fused attention: a band of keys (restricted attention's rule in the kernels' form)") {
  const sizes z{2, 4, 2, 300, 300, 32, 32};
  const auto x = random_data(z, 21);
  const std::vector<index_t> lengths{300, 140};
  SUBCASE("symmetric, as restricted attention's r = 9, with padding") {
    check_against_reference<double, float>(problem_of(z, &lengths, false), x, {1e-12, 2e-5}, key_band{-4, 4});
  }
  SUBCASE("the 130 keys before, with the causal mask") {
    check_against_reference<double>(problem_of(z, nullptr, true), x, {1e-12}, key_band{-130, 0});
  }
  SUBCASE("wider than a tile, shifted queries at 100 … 399, and a key band past the diagonal") {
    const sizes longer{1, 2, 2, 300, 500, 16, 24};
    const auto y = random_data(longer, 22);
    check_against_reference<double>(problem_of(longer, nullptr, false, 100), y, {1e-12}, key_band{-200, 70});
    check_against_reference<double>(problem_of(longer, nullptr, true, 100), y, {1e-12}, key_band{-3, 70});
  }
  SUBCASE("past the keys for most queries, or before key 0 for the first: their rows see nothing") {
    check_against_reference<double>(problem_of(z, nullptr, false), x, {1e-12}, key_band{250, 400});
    check_against_reference<double>(problem_of(z, nullptr, false), x, {1e-12}, key_band{-400, -250});
  }
  SUBCASE("a key tile seen by one query of the next query tile: the backward's query span ends right") {
    // Keys 0 … 127 are seen by positions up to 127 + 1 = 128, the first of the second query
    // tile: a span one short leaves key 127's gradients without that query's share.
    check_against_reference<double>(problem_of(z, nullptr, false), x, {1e-12}, key_band{-1, 3});
    check_against_reference<double>(problem_of(z, nullptr, true), x, {1e-12}, key_band{-1, 3});
  }
}

/// A band of keys that remembers the farthest pair (|key − query|) it was asked about.
struct watched_band : key_band {
  std::atomic<index_t>* farthest;
  bool operator()(index_t query, index_t key) const {
    const index_t distance = std::abs(key - query);
    index_t seen = farthest->load();
    while (distance > seen && !farthest->compare_exchange_weak(seen, distance)) {
    }
    return key_band::operator()(query, key);
  }
};

/// The same, with no spans to give: the kernel must ask it pair by pair.
struct watched_rule {
  watched_band band;
  bool operator()(index_t query, index_t key) const { return band(query, key); }
};

TEST_CASE("fused attention walks only the tiles a band of keys reaches, forward and backward") {
  const sizes z{1, 2, 2, 2000, 2000, 16, 16};
  const auto x = random_data(z, 23);
  const auto p = problem_of(z, nullptr, false);
  std::atomic<index_t> farthest{0};
  const watched_band band{{-8, 8}, &farthest};
  const auto with_spans = fused<double>(p, x, band);
  // Pairs of the tiles the band touches alone: within a query tile and a key tile of the band.
  CHECK(farthest.load() <= 8 + fused_attention<cpu>::query_tile + fused_attention<cpu>::key_tile);
  farthest = 0;
  const auto pair_by_pair = fused<double>(p, x, watched_rule{band});
  CHECK(farthest.load() == z.keys - 1);  // asked of every tile, each then skipped
  // The same sums, over tiles cut at other keys (the band's walk starts at its first key).
  CHECK(relative_error(with_spans.out, pair_by_pair.out) < 1e-12);
  CHECK(relative_error(with_spans.log_sum_exp, pair_by_pair.log_sum_exp) < 1e-12);
  CHECK(relative_error(with_spans.d_q, pair_by_pair.d_q) < 1e-12);
  CHECK(relative_error(with_spans.d_k, pair_by_pair.d_k) < 1e-12);
  CHECK(relative_error(with_spans.d_v, pair_by_pair.d_v) < 1e-12);
}

TEST_CASE("fused attention refuses a first query before position 0") {
  const sizes z{1, 1, 1, 4, 4, 8, 8};
  const auto x = random_data(z, 24);
  CHECK_THROWS_WITH_AS(fused<double>(problem_of(z, nullptr, true, -1), x, every_pair{}),
                       doctest::Contains("positions count from 0"), std::invalid_argument);
}

TEST_CASE("fused attention adds a bias shared by the heads: the unfused path's masks, and any other") {
  const sizes z{2, 3, 3, 140, 180, 16, 16};
  auto x = random_data(z, 16);
  x.bias = random_values(z.batch * z.queries * z.keys, 17);
  for (std::size_t i = 0; i < x.bias.size(); i += 3) x.bias[i] = -1e9;  // a mask: hidden keys
  check_against_reference<double, float>(problem_of(z, nullptr, false), x, {1e-12, 2e-5});
  check_against_reference<double>(problem_of(z, nullptr, true, 20), x, {1e-12});
}

TEST_CASE("fused attention: a row that sees no key gives 0 and −∞, and no NaN in any gradient") {
  const sizes z{2, 2, 2, 5, 6, 4, 4};
  const auto x = random_data(z, 13);
  const std::vector<index_t> lengths{6, 0};  // the second sentence has no key at all
  const auto p = problem_of(z, &lengths, false);
  const auto got = fused<double>(p, x, every_pair{});
  for (index_t r = 2 * 5; r < 4 * 5; ++r) {
    CHECK(got.log_sum_exp[std::size_t(r)] == -std::numeric_limits<double>::infinity());
    for (index_t c = 0; c < 4; ++c) CHECK(got.out[std::size_t(r * 4 + c)] == 0.0);
  }
  check_against_reference<double>(p, x, {1e-12});
}

TEST_CASE("fused attention's backward is the derivative of its forward (central differences, double)") {
  const sizes z{1, 2, 1, 9, 11, 3, 2};
  const std::vector<index_t> lengths{10};
  const auto p = problem_of(z, &lengths, true, 2);
  auto x = random_data(z, 14);
  const auto loss = [&](const attention_data& y) {  // Σ d_out ⊙ out
    const auto r = fused<double>(p, y, within_four{});
    double sum = 0;
    for (std::size_t i = 0; i < r.out.size(); ++i) sum += r.out[i] * y.d_out[i];
    return sum;
  };
  const auto analytic = fused<double>(p, x, within_four{});
  const double h = 1e-6;
  const auto check = [&](std::vector<double>& input, const std::vector<double>& gradient, const char* what) {
    double worst = 0;
    for (std::size_t i = 0; i < input.size(); ++i) {
      const double kept = input[i];
      input[i] = kept + h;
      const double up = loss(x);
      input[i] = kept - h;
      const double down = loss(x);
      input[i] = kept;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - gradient[i]));
    }
    INFO(what);
    CHECK(worst < 1e-8);
  };
  check(x.q, analytic.d_q, "q");
  check(x.k, analytic.d_k, "k");
  check(x.v, analytic.d_v, "v");
}

#ifdef _OPENMP
TEST_CASE("fused attention gives the same bits on one thread and on every thread") {
  // Many tasks; and one task, run outside a parallel region, where a tile's products (oneDNN's
  // sgemm) may take every thread themselves.
  for (const sizes z : {sizes{2, 4, 2, 200, 200, 32, 32}, sizes{1, 1, 1, 100, 100, 64, 64}}) {
    CAPTURE(z.batch);
    const auto x = random_data(z, 15);
    const auto p = problem_of(z, nullptr, true);
    const auto many = fused<float>(p, x, every_pair{});
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = fused<float>(p, x, every_pair{});
    omp_set_num_threads(threads);
    CHECK(many.out == one.out);
    CHECK(many.d_q == one.d_q);
    CHECK(many.d_k == one.d_k);
    CHECK(many.d_v == one.d_v);
  }
}
#endif

}  // namespace
