// primitives_test.cu built as C++ against the CPU backend: the same checks of the CPU's device
// primitives, and of the references the GPU's are held to.
#define ATTN_GPU_TEST_HOST
#include "primitives_test.cu"
