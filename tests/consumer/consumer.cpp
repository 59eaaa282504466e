// A program that uses attn the way another project would: one umbrella include.
// Built by tests/consumer/run.sh as a Meson subproject user, with pkg-config
// and with CMake's find_package, against the installed headers.
#include <attn/attn.hpp>

#include <cmath>
#include <cstdio>

using rows = attn::dim<"rows">;
using cols = attn::dim<"cols", 3>;
using inner = attn::dim<"inner", 4>;

int main() {
  attn::tensor<float, attn::shape<rows, inner>> a(2);
  attn::tensor<float, attn::shape<inner, cols>> b;
  for (attn::index_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i);
  for (attn::index_t i = 0; i < b.size(); ++i) b.data()[i] = 1.0f;
  // Row sums of a, repeated over 3 columns, through a contraction and a fused expression.
  auto c = attn::eval(attn::relu(attn::contract<inner>(a, b)) * 0.5f);
  const bool ok = std::fabs(c(0, 0) - 3.0f) < 1e-6f && std::fabs(c(1, 2) - 11.0f) < 1e-6f;
  std::printf("attn %s: c%s = [[%g %g %g] [%g %g %g]] %s\n", attn::version(),
              c.extents().to_string().c_str(), c(0, 0), c(0, 1), c(0, 2), c(1, 0), c(1, 1), c(1, 2),
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
