// --device: where attn-train and attn-translate run their model, "cpu" or "cuda[:N]".
#pragma once

#include <string>

namespace attn::examples {

struct device_choice {
  bool cuda = false;
  int index = 0;  // the GPU, for cuda
  std::string to_string() const { return cuda ? "cuda:" + std::to_string(index) : "cpu"; }
};

/// "cpu", "cuda" (GPU 0) or "cuda:N"; throws std::invalid_argument saying what was expected.
device_choice parse_device(const std::string& text);

/// Whether this program was compiled with the CUDA backend.
bool cuda_compiled();

/// Makes GPU `index` the current device. Returns an empty string, or one line that says what
/// is missing (no CUDA in this build, no driver, no such GPU).
std::string use_cuda_device(int index);

/// Peak device memory in use since the program started, in bytes (0 on the CPU).
unsigned long long peak_device_memory();

}  // namespace attn::examples
