// Harness self-test fixture: the ko half compiles (the rule does not fire), so
// the harness must report a failure.
// expect: attn::selftest: rule fired

template <int N>
struct nonzero {
  static_assert(N != 0, "attn::selftest: rule fired");
  static constexpr int value = N;
};

int main() {
  int x = nonzero<2>::value;
#ifdef ATTN_KO
  x += nonzero<3>::value;
#endif
  return x == 0;
}
