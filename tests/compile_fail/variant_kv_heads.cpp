// Compile-fail case: a variant with three key/value heads for a model of four query heads.
// expect: a variant's key/value heads must divide the query heads

#include <attn/nn.hpp>

using namespace attn;
struct widths : nn::config<nn::widths<8, 12, 4, 3, 3>> {};

template <class T, class C, class D>
struct two_kv_heads {
  using kv_heads = dim<"kv_heads", 2>;
};
template <class T, class C, class D>
struct three_kv_heads {
  using kv_heads = dim<"kv_heads", 3>;
};

int main() {
  using ok = nn::multi_head_attention<float, widths, cpu, two_kv_heads<float, widths, cpu>>;
  static_assert(ok::key_width::extent == 6);
#ifdef ATTN_KO
  using bad = nn::multi_head_attention<float, widths, cpu, three_kv_heads<float, widths, cpu>>;
  static_assert(bad::key_width::extent == 9);
#endif
}
