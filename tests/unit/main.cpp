// doctest's main() for the unit test executable; the tests live in <layer>/*_test.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
