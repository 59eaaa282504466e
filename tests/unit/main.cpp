// doctest's main() for the unit test executables; the tests live in <layer>/*_test.cpp.
// DOCTEST_CONFIG_IMPLEMENT too: the precompiled header (pch/) has already read doctest's
// declarations, where the _WITH_MAIN macro alone would be seen, so only its implementation
// part is read here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
