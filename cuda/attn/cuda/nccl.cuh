// The NCCL communicator: data-parallel training over GPUs, one process a GPU, behind the same
// interface as MPI's for CPU processes (include/attn/train/communicator.hpp). Sums run on a
// stream of their own, so that a bucket of gradients is summed while the backward pass computes
// the next (train::gradient_buckets); a watchdog thread ends the process, with a message naming
// its rank, when a sum has waited too long for the others or NCCL reports an error, instead of
// hanging on a GPU kernel that waits for a process that is gone (ncclCommAbort). Host code only:
// g++ or nvcc compile it, with CUDA's and NCCL's headers.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <attn/train/communicator.hpp>

#include "memory.cuh"

namespace attn::cuda_backend {

/// Throws cuda_error naming the call, the NCCL result and where the check was made.
inline void check(ncclResult_t status, std::string_view what,
                  const std::source_location& where = std::source_location::current()) {
  if (status != ncclSuccess) detail::fail("NCCL", what, ncclGetErrorString(status), where);
}

/// The id every process of a job builds its communicator from, as text (hex): made by one
/// process and handed to the others (attn-train's launcher puts it in their environment; under
/// mpirun, MPI broadcasts it).
inline std::string make_nccl_id() {
  ncclUniqueId id;
  ATTN_CUDA_CHECK(ncclGetUniqueId(&id));
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  for (const char byte : id.internal) {
    text += digits[(static_cast<unsigned char>(byte) >> 4) & 0xF];
    text += digits[static_cast<unsigned char>(byte) & 0xF];
  }
  return text;
}

/// The id from make_nccl_id's text; throws std::invalid_argument on anything else.
inline ncclUniqueId parse_nccl_id(std::string_view text) {
  ncclUniqueId id;
  if (text.size() != 2 * sizeof id.internal)
    throw std::invalid_argument("an NCCL id is " + std::to_string(2 * sizeof id.internal) + " hex digits, not " +
                                std::to_string(text.size()));
  auto value = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::invalid_argument(std::string("an NCCL id holds hex digits, not '") + c + "'");
  };
  for (std::size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = static_cast<char>(value(text[2 * i]) << 4 | value(text[2 * i + 1]));
  return id;
}

/// One process's member of an NCCL communicator of `size` processes, on the current GPU.
class nccl_communicator final : public train::communicator {
 public:
  /// Joins the others (blocks until all `size` have called it with the same id). A sum that has
  /// not finished after `timeout` ends the process (a peer died or hangs).
  nccl_communicator(int rank, int size, const ncclUniqueId& id,
                    std::chrono::seconds timeout = std::chrono::seconds(600))
      : rank_(rank), size_(size), timeout_(timeout) {
    ATTN_CUDA_CHECK(cudaGetDevice(&device_));
    ATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ATTN_CUDA_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    watchdog_ = std::thread([this] { watch(); });
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() override {
    stop_ = true;
    if (watchdog_.joinable()) watchdog_.join();
    (void)cudaStreamSynchronize(stream_);
    (void)ncclCommDestroy(comm_);
    for (auto& p : pending_) (void)cudaEventDestroy(p.done);
    (void)cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool sums_device_memory() const override { return true; }

  /// Device memory is summed in place; host memory (the trainer's few numbers a step) goes
  /// through the device and back. Returns when the sum is done.
  void all_reduce_sum(std::span<float> values) override { sum_now(values.data(), values.size(), ncclFloat); }
  void all_reduce_sum(std::span<double> values) override { sum_now(values.data(), values.size(), ncclDouble); }
  /// Device memory only: the sum is enqueued on the communicator's stream after what attn's
  /// stream has enqueued (the gradients being written), and attn's stream waits for it at
  /// wait_all().
  void start_all_reduce_sum(std::span<float> values) override { start(values.data(), values.size(), ncclFloat); }
  void start_all_reduce_sum(std::span<double> values) override { start(values.data(), values.size(), ncclDouble); }
  void wait_all() override {
    cudaEvent_t done = record_on(stream_);
    ATTN_CUDA_CHECK(cudaStreamWaitEvent(cuda_backend::stream(), done, 0));
    watch_event(done);
  }

  void barrier() override {
    float one = 1;
    all_reduce_sum(std::span<float>(&one, 1));
  }

  [[noreturn]] void abort(int status) noexcept override {
    (void)ncclCommAbort(comm_);
    std::fflush(nullptr);
    std::_Exit(status);
  }

 private:
  /// An event recorded on `s` now.
  static cudaEvent_t record_on(cudaStream_t s) {
    cudaEvent_t event = nullptr;
    ATTN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    ATTN_CUDA_CHECK(cudaEventRecord(event, s));
    return event;
  }

  void start(void* data, std::size_t count, ncclDataType_t type) {
    if (count == 0) return;
    cudaPointerAttributes where{};
    ATTN_CUDA_CHECK(cudaPointerGetAttributes(&where, data));
    if (where.type != cudaMemoryTypeDevice && where.type != cudaMemoryTypeManaged)
      throw std::invalid_argument("attn::cuda::nccl_communicator: start_all_reduce_sum takes device memory");
    // The sum reads what attn's stream is writing: the communicator's stream waits for it.
    cudaEvent_t written = record_on(cuda_backend::stream());
    ATTN_CUDA_CHECK(cudaStreamWaitEvent(stream_, written, 0));
    ATTN_CUDA_CHECK(cudaEventDestroy(written));
    ATTN_CUDA_CHECK(ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_));
  }

  void sum_now(void* data, std::size_t count, ncclDataType_t type) {
    if (count == 0) return;
    cudaPointerAttributes where{};
    ATTN_CUDA_CHECK(cudaPointerGetAttributes(&where, data));
    const bool on_device = where.type == cudaMemoryTypeDevice || where.type == cudaMemoryTypeManaged;
    const std::size_t bytes = count * (type == ncclDouble ? sizeof(double) : sizeof(float));
    scratch_ptr buffer;  // host memory goes through the device
    if (!on_device) {
      buffer = allocate_scratch(bytes);
      ATTN_CUDA_CHECK(cudaMemcpyAsync(buffer.get(), data, bytes, cudaMemcpyHostToDevice, cuda_backend::stream()));
    }
    start(on_device ? data : buffer.get(), count, type);
    wait_all();
    if (!on_device)
      ATTN_CUDA_CHECK(cudaMemcpyAsync(data, buffer.get(), bytes, cudaMemcpyDeviceToHost, cuda_backend::stream()));
    synchronize();
  }

  /// Hands an event that marks the end of started sums to the watchdog.
  void watch_event(cudaEvent_t done) {
    const std::lock_guard lock(mutex_);
    pending_.push_back({done, std::chrono::steady_clock::now()});
  }

  /// Every 200 ms: sums that finished are forgotten; one older than the timeout, or an error
  /// NCCL reports, ends the process with a message (ncclCommAbort lets the stuck kernels go).
  void watch() {
    (void)cudaSetDevice(device_);
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        fatal(std::string("NCCL reports ") + ncclGetErrorString(async));
      const std::lock_guard lock(mutex_);
      std::erase_if(pending_, [](const pending& p) {
        if (cudaEventQuery(p.done) != cudaSuccess) return false;
        (void)cudaEventDestroy(p.done);
        return true;
      });
      for (const pending& p : pending_)
        if (std::chrono::steady_clock::now() - p.since > timeout_)
          fatal("a sum over the processes has waited " + std::to_string(timeout_.count()) +
                " s for the others (one died or hangs)");
    }
  }

  [[noreturn]] void fatal(const std::string& why) noexcept {
    std::fprintf(stderr, "attn: rank %d of %d: %s; stopping\n", rank_, size_, why.c_str());
    abort(1);
  }

  struct pending {
    cudaEvent_t done;
    std::chrono::steady_clock::time_point since;
  };
  int rank_, size_, device_ = 0;
  std::chrono::seconds timeout_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::mutex mutex_;
  std::vector<pending> pending_;
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace attn::cuda_backend
