// Compile-fail case: a fused attention mask rule given as an expression that reads a tensor (it
// would hold for one sentence only, read where no kernel can).
// expect: a mask rule must be computed from the query's and the key's coordinates alone

#include <attn/attn.hpp>

using namespace attn;
using B = dim<"batch">;
using Q = dim<"queries">;
using K = dim<"keys">;
using pairs = shape<B, Q, K>;

int main() {
  const extents<pairs> one_sentence(1, 4, 5);
  const auto query = broadcast<pairs>(iota<float, Q>(4), one_sentence);
  const auto key = broadcast<pairs>(iota<float, K>(5), one_sentence);
  grad::pair_rule ok{abs(query - key) <= 2.0f};  // coordinates and constants: fine
  (void)ok;
#ifdef ATTN_KO
  const tensor<float, pairs> allowed_keys(1, 4, 5);
  grad::pair_rule bad{key <= allowed_keys};
  (void)bad;
#endif
}
