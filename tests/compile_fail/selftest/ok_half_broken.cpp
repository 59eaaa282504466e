// Harness self-test fixture: the ok half does not compile, so the harness must
// report a failure even though the ko half fails with the expected message.
// expect: attn::selftest: rule fired

template <int N>
struct nonzero {
  static_assert(N != 0, "attn::selftest: rule fired");
  static constexpr int value = N;
};

int main() {
  int x = undeclared_name;
#ifdef ATTN_KO
  x += nonzero<0>::value;
#endif
  return x;
}
