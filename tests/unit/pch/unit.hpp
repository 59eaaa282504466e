// The headers the files of `unit` read, parsed once (a precompiled header, meson's cpp_pch,
// given to every file before its own lines): doctest, Eigen and the library took 5 to 6 of a
// test file's seconds to parse under the sanitizers, most of a small one's (docs/testing.md,
// "Where a test run's time goes"). Each file still includes what it uses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <attn/attn.hpp>
#include <attn/decode.hpp>
