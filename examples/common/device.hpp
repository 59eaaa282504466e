// --device: where attn-train and attn-translate run their model, "cpu" or "cuda[:N]".
#pragma once

#include <string>

#include <CLI/CLI.hpp>

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

/// Opens (true) or closes (false) a GPU profiler's capture range: cudaProfilerStart and
/// cudaProfilerStop, which Nsight Compute (--profile-from-start off) and Nsight Systems
/// (--capture-range=cudaProfilerApi) wait for. Nothing without CUDA.
void profiler_capture(bool on);

/// --device and --tf32 as given on a command line.
struct device_flags {
  std::string device = "cpu";
  std::string tf32 = "off";
};

/// Adds --device and --tf32 to a program's command line, in `group`.
void add_device_flags(CLI::App& app, device_flags& flags, const std::string& group);

/// After parsing: the device and TF32 choice, or (returned) one line that says why they cannot
/// be had: --tf32 on without a GPU, or what use_cuda_device found missing. Makes the GPU current.
std::string apply_device_flags(const device_flags& flags, device_choice& device, bool& tf32);

}  // namespace attn::examples
