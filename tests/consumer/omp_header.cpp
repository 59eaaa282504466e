// Whether clang++ has OpenMP's header (tests/consumer/meson.build): Debian's libomp-dev.
#include <omp.h>
