// Device memory and errors: attn::memory<cuda> (zero-filled, copies), host <-> device
// transfers, scratch from the stream-ordered pool, the cuBLAS handle cache, and the checks
// that turn CUDA and cuBLAS failures into exceptions naming the call and its place.
#include "gpu_test.cuh"

#include <cstdint>
#include <string>
#include <thread>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;

using batch = attn::dim<"batch">;
using len = attn::dim<"len">;
using d4 = attn::dim<"d", 4>;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void raw_memory() {
  using memory = attn::memory<attn::cuda>;
  guard_exceptions("allocate is zero-filled", [] {
    const std::size_t bytes = 1'000'003;
    void* p = memory::allocate(bytes);
    std::vector<unsigned char> back(bytes, 0xFF);
    cuda_ok(cudaMemcpy(back.data(), p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    bool zero = true;
    for (unsigned char c : back) zero = zero && c == 0;
    expect(zero, "allocate is zero-filled");
    expect(reinterpret_cast<std::uintptr_t>(p) % memory::alignment == 0, "allocate is aligned");

    // copy: device to device, the bytes as they were.
    std::vector<unsigned char> pattern(bytes);
    for (std::size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
    cuda_ok(cudaMemcpy(p, pattern.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    void* q = memory::allocate(bytes);
    memory::copy(q, p, bytes);
    cuda_ok(cudaMemcpy(back.data(), q, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    expect(back == pattern, "copy device to device");
    memory::deallocate(q);
    memory::deallocate(p);
  });
  guard_exceptions("allocate(0)", [] {
    void* p = memory::allocate(0);
    memory::deallocate(p);
    memory::deallocate(nullptr);
    settle("allocate(0)");
    expect(p == nullptr, "allocate(0) is null, and freeing null is fine");
  });
}

void transfers() {
  guard_exceptions("round trips", [] {
    const auto hf = random_host<float>(extents<shape<batch, len, d4>>(3, 5));
    expect(attn::cuda_backend::to_host(attn::cuda_backend::to_device(hf)).size() == hf.size(),
           "to_host(to_device(x)) keeps the extents");
    const auto back = attn::cuda_backend::to_host(attn::cuda_backend::to_device(hf));
    expect(std::memcmp(back.data(), hf.data(), hf.bytes()) == 0 && back.extents() == hf.extents(),
           "round trip float [batch, len, d=4]");
    const auto hi = random_host<int>(extents<shape<len>>(1001), -1000, 1000);
    const auto bi = attn::cuda_backend::to_host(attn::cuda_backend::to_device(hi));
    expect(std::memcmp(bi.data(), hi.data(), hi.bytes()) == 0, "round trip int [len]");
    const auto hb = random_host<bool>(extents<shape<len>>(77));
    const auto bb = attn::cuda_backend::to_host(attn::cuda_backend::to_device(hb.view()));
    expect(std::memcmp(bb.data(), hb.data(), hb.bytes()) == 0, "round trip bool [len], from a view");
    attn::tensor<double, shape<>, attn::cpu> hs{extents<shape<>>{}};
    hs.data()[0] = 2.75;
    expect(attn::cuda_backend::to_host(attn::cuda_backend::to_device(hs)).data()[0] == 2.75,
           "round trip of a rank-0 tensor");
    const auto he = random_host<float>(extents<shape<batch, len, d4>>(0, 5));
    expect(attn::cuda_backend::to_host(attn::cuda_backend::to_device(he)).size() == 0,
           "round trip of an empty tensor");
  });
  guard_exceptions("new device tensors are zero", [] {
    const attn::tensor<float, shape<batch, len>, attn::cuda> t(4, 9);
    const auto host = attn::cuda_backend::to_host(t);
    bool zero = true;
    for (index_t i = 0; i < host.size(); ++i) zero = zero && host.data()[i] == 0.0f;
    expect(zero, "new device tensors are zero");
  });
  guard_exceptions("tensor copies", [] {
    const auto h = random_host<float>(extents<shape<len>>(100));
    const auto a = attn::cuda_backend::to_device(h);
    attn::tensor<float, shape<len>, attn::cuda> b(a);  // copy constructor: memory::copy
    attn::tensor<float, shape<len>, attn::cuda> c(extents<shape<len>>(100));
    c = b;  // copy assignment: an assignment of a view
    const auto back = attn::cuda_backend::to_host(c);
    expect(std::memcmp(back.data(), h.data(), h.bytes()) == 0, "copy construction and copy assignment");
  });
}

void scratch_and_handles() {
  guard_exceptions("scratch", [] {
    auto p = attn::cuda_backend::allocate_scratch(4096);
    expect(p != nullptr, "allocate_scratch gives memory");
    expect(attn::cuda_backend::allocate_scratch(0) == nullptr, "allocate_scratch(0) is null");
    attn::cuda_backend::workspace ws;
    const auto v = ws.make<float>(extents<shape<batch, len>>(3, 7));
    cuda_ok(cudaMemset(v.data(), 0, 21 * sizeof(float)), "cudaMemset on scratch");
    p.reset();
    attn::cuda_backend::synchronize();
    expect(v.size() == 21, "workspace views have the requested extents");
  });
  guard_exceptions("cuBLAS handles", [] {
    const cublasHandle_t first = attn::cuda_backend::blas_handle();
    const cublasHandle_t again = attn::cuda_backend::blas_handle();
    cublasHandle_t other = nullptr;
    std::thread([&] { other = attn::cuda_backend::blas_handle(); }).join();
    expect(first != nullptr && first == again, "one cuBLAS handle per thread, reused");
    expect(other != nullptr && other != first, "another thread gets its own handle");
  });
  guard_exceptions("multiprocessor_count", [] {
    expect(attn::cuda_backend::multiprocessor_count() > 0, "multiprocessor_count > 0");
  });
}

void errors() {
  // Out of memory: a cuda_error (a std::runtime_error) naming the call and the CUDA error.
  {
    std::string message;
    try {
      (void)attn::memory<attn::cuda>::allocate(std::size_t{1} << 60);
    } catch (const std::runtime_error& error) {
      message = error.what();
    }
    std::printf("      (message: %s)\n", message.c_str());
    expect(contains(message, "cudaMalloc") && contains(message, "cudaErrorMemoryAllocation") &&
               contains(message, "memory.cuh:"),
           "out of memory throws, naming cudaMalloc, the error and the place");
  }
  guard_exceptions("usable after out of memory", [] {
    const auto t = attn::cuda_backend::to_device(random_host<float>(extents<shape<len>>(10)));
    settle("after out of memory");
    expect(t.size() == 10, "usable after out of memory");
  });
  // ATTN_CUDA_CHECK names the call as written and the file and line of the check.
  {
    std::string message;
    int line = 0;
    try {
      line = __LINE__ + 1;
      ATTN_CUDA_CHECK(cudaSetDevice(1 << 20));
    } catch (const attn::cuda_backend::cuda_error& error) {
      message = error.what();
    }
    (void)cudaGetLastError();
    std::printf("      (message: %s)\n", message.c_str());
    expect(contains(message, "cudaSetDevice(1 << 20)") && contains(message, "memory_test.cu:" + std::to_string(line)) &&
               contains(message, "cudaErrorInvalidDevice"),
           "ATTN_CUDA_CHECK throws with the call, file:line and error");
  }
  {
    std::string message;
    try {
      ATTN_CUDA_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    } catch (const std::runtime_error& error) {
      message = error.what();
    }
    std::printf("      (message: %s)\n", message.c_str());
    expect(contains(message, "cuBLAS") && contains(message, cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)),
           "cuBLAS statuses throw too");
  }
  guard_exceptions("no throw on success", [] {
    ATTN_CUDA_CHECK(cudaSuccess);
    ATTN_CUDA_CHECK(CUBLAS_STATUS_SUCCESS);
    expect(true, "success does not throw");
  });
}

}  // namespace

int main() {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  try {
    raw_memory();
    transfers();
    scratch_and_handles();
    errors();
  } catch (const std::exception& error) {
    fail("memory tests", std::string("threw: ") + error.what());
  }
  return finish();
}
