// Harness self-test fixture: a well-formed case (it passes with its own
// expectation; the harness must reject it when told to expect another message).
// expect: attn::selftest: rule fired

template <int N>
struct nonzero {
  static_assert(N != 0, "attn::selftest: rule fired");
  static constexpr int value = N;
};

int main() {
  int x = nonzero<2>::value;
#ifdef ATTN_KO
  x += nonzero<0>::value;
#endif
  return x == 0;
}
