// --device for the example programs. With the CUDA backend (ATTN_EXAMPLES_CUDA) this file
// talks to the CUDA runtime; g++ compiles it either way.
#include "device.hpp"

#include <cstdint>
#include <stdexcept>

#if defined(ATTN_EXAMPLES_CUDA)
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#endif

namespace attn::examples {

device_choice parse_device(const std::string& text) {
  if (text == "cpu") return {};
  if (text == "cuda") return {true, 0};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos)
    return {true, std::stoi(text.substr(5))};
  throw std::invalid_argument("expected cpu, cuda or cuda:N (N a GPU number), got '" + text + "'");
}

void add_device_flags(CLI::App& app, device_flags& flags, const std::string& group) {
  app.add_option("--device", flags.device, "cpu, or cuda[:N] for GPU N (a CUDA build of the program; docs/gpu.md)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              parse_device(text);
              return std::string();
            } catch (const std::exception& e) {
              return std::string(e.what());
            }
          },
          "cpu|cuda[:N]", "device"))
      ->group(group);
  app.add_option("--tf32", flags.tf32, "on: fp32 products on a GPU's tensor cores in TF32 (faster, 10-bit mantissas)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}))
      ->group(group);
}

std::string apply_device_flags(const device_flags& flags, device_choice& device, bool& tf32) {
  device = parse_device(flags.device);
  tf32 = flags.tf32 == "on";
  if (tf32 && !device.cuda) return "--tf32 on applies to --device cuda only";
  if (!device.cuda) return "";
  const std::string missing = use_cuda_device(device.index);
  return missing.empty() ? "" : "--device " + flags.device + ": " + missing;
}

#if defined(ATTN_EXAMPLES_CUDA)
bool cuda_compiled() { return true; }

std::string use_cuda_device(int index) {
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess)
    return std::string("no usable CUDA device: ") + cudaGetErrorString(status);
  if (count == 0) return "no CUDA device on this machine";
  if (index >= count)
    return "there is no GPU " + std::to_string(index) + ": this machine has " + std::to_string(count) +
           " (cuda:0 to cuda:" + std::to_string(count - 1) + ")";
  if (const cudaError_t status = cudaSetDevice(index); status != cudaSuccess)
    return "cudaSetDevice(" + std::to_string(index) + "): " + cudaGetErrorString(status);
  return "";
}

unsigned long long peak_device_memory() {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  std::uint64_t peak = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &peak) != cudaSuccess)
    return 0;
  return peak;
}

void profiler_capture(bool on) {
  if (const cudaError_t status = on ? cudaProfilerStart() : cudaProfilerStop(); status != cudaSuccess)
    throw std::runtime_error(std::string(on ? "cudaProfilerStart" : "cudaProfilerStop") + ": " +
                             cudaGetErrorString(status));
}
#else
bool cuda_compiled() { return false; }

std::string use_cuda_device(int) {
  return "this program was built without CUDA (reconfigure with nvcc on PATH and -Dcuda=enabled; docs/gpu.md)";
}

unsigned long long peak_device_memory() { return 0; }

void profiler_capture(bool) {}
#endif

}  // namespace attn::examples
