// elementwise_test.cu built as C++ against the CPU backend: the same checks of the CPU's
// lowering (Eigen), and of the references the GPU's kernels are held to.
#define ATTN_GPU_TEST_HOST
#include "elementwise_test.cu"
