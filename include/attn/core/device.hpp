// Devices: plain tags, each with a memory policy and an executor that lowers expressions for it.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <map>

namespace attn {

/// Host memory; expressions lower to Eigen (include/attn/cpu).
struct cpu {};

/// An NVIDIA GPU; memory and lowering are defined in cuda/attn/cuda, built by nvcc.
struct cuda {};

template <class D>
concept device = std::same_as<D, cpu> || std::same_as<D, cuda>;

/// Whether the host reads and writes a device's memory in place (its tensors' data() are host
/// pointers), so that results bound for the host may be written there directly.
template <class D>
inline constexpr bool host_addressable = std::same_as<D, cpu>;

/// How a device allocates, frees and copies raw bytes. Specialised per device; using a
/// device whose backend header was not included fails as an incomplete type.
template <class Device>
struct memory;

namespace detail {
/// Freed host blocks of 64 KiB and more, kept for the next allocation that fits (best fit, at
/// most twice the request): a training step allocates the same activation sizes every time, and returning them
/// to the system (glibc maps blocks over 32 MiB afresh) costs page faults and zeroing. At most
/// 256 MiB are kept (ATTN_HOST_CACHE_MIB changes it): on a trainer's varying batches a 2 GiB
/// cache raised peak memory by 30% for no measurable speed (docs/benchmarks.md).
class host_block_cache {
 public:
  static constexpr std::size_t smallest = std::size_t{64} << 10;
  static constexpr std::size_t default_limit = std::size_t{256} << 20;

  /// Bytes kept at most: ATTN_HOST_CACHE_MIB from the environment, else default_limit.
  static std::size_t limit() {
    static const std::size_t bytes = [] {
      const char* text = std::getenv("ATTN_HOST_CACHE_MIB");
      char* end = nullptr;
      const unsigned long long mib = text != nullptr ? std::strtoull(text, &end, 10) : 0;
      return text != nullptr && end != text && *end == '\0' ? std::size_t(mib) << 20 : default_limit;
    }();
    return bytes;
  }

  /// Never destroyed, so tensors with static storage may outlive every other static.
  static host_block_cache& instance() {
    static host_block_cache* cache = new host_block_cache;
    return *cache;
  }

  /// Size classes 2^k · {4, 5, 6, 7} / 4: at most 25% over the request, and few classes.
  static std::size_t size_class(std::size_t bytes) {
    if (bytes < smallest) return bytes;
    std::size_t power = smallest;
    while (power * 2 <= bytes) power *= 2;
    const std::size_t quarter = power / 4;
    return (bytes + quarter - 1) / quarter * quarter;
  }

  /// The smallest kept block of at least `bytes` and at most twice that, or null; `bytes`
  /// becomes its size. Taking a larger block, not only an equal one, is what keeps the cache
  /// from filling with blocks of every size when batch shapes vary (a trainer's batches).
  void* take(std::size_t& bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = free_.lower_bound(bytes);
    if (found == free_.end() || found->first > 2 * bytes) return nullptr;
    void* p = found->second;
    bytes = found->first;
    free_.erase(found);
    cached_ -= bytes;
    return p;
  }

  /// Keeps the block unless the cache is full; false means the caller frees it.
  bool give(void* p, std::size_t bytes) {
    if (bytes < smallest) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + bytes > limit()) return false;
    free_.emplace(bytes, p);
    cached_ += bytes;
    return true;
  }

  /// Frees every kept block.
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  std::size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // by size, for best fit
  std::size_t cached_ = 0;
};
/// Bytes of live host tensors and their peak since the last reset: what a benchmark reports as
/// a computation's memory (counted in the blocks' size classes, as they are taken).
class host_usage {
 public:
  static host_usage& instance() {
    static host_usage* usage = new host_usage;
    return *usage;
  }
  void add(std::size_t bytes) {
    const std::size_t now = used_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  void remove(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  std::size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(used(), std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> used_{0}, peak_{0};
};
}  // namespace detail

template <>
struct memory<cpu> {
  /// Cache-line alignment: Eigen's widest packets and OpenBLAS both prefer it.
  static constexpr std::size_t alignment = 64;

  /// Zero-filled, aligned storage; never returns null (throws std::bad_alloc).
  static void* allocate(std::size_t bytes) {
    void* p = allocate_uninitialized(bytes);
    std::memset(p, 0, bytes);
    return p;
  }

  /// Aligned storage with unspecified contents, for results about to be written: the request's
  /// size class (so a power of two takes no more) and a header one alignment unit before the
  /// returned address that holds the block's size.
  static void* allocate_uninitialized(std::size_t bytes) {
    std::size_t total = detail::host_block_cache::size_class(rounded(bytes)) + alignment;
    void* block = detail::host_block_cache::instance().take(total);
    if (block == nullptr) block = std::aligned_alloc(alignment, total);
    if (block == nullptr) throw std::bad_alloc();
    *static_cast<std::size_t*>(block) = total;
    detail::host_usage::instance().add(total);
    return static_cast<char*>(block) + alignment;
  }

  static void deallocate(void* p) noexcept {
    if (p == nullptr) return;
    void* block = static_cast<char*>(p) - alignment;
    const std::size_t total = *static_cast<std::size_t*>(block);
    detail::host_usage::instance().remove(total);
    if (!detail::host_block_cache::instance().give(block, total)) std::free(block);
  }

  /// Bytes held by live tensors now, and at most since reset_peak().
  static std::size_t used_bytes() { return detail::host_usage::instance().used(); }
  static std::size_t peak_bytes() { return detail::host_usage::instance().peak(); }
  static void reset_peak() { detail::host_usage::instance().reset_peak(); }

  static void copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  /// Between host memory and this device's: for the CPU, the same copy.
  static void copy_from_host(void* dst, const void* host, std::size_t bytes) { copy(dst, host, bytes); }
  static void copy_to_host(void* host, const void* src, std::size_t bytes) { copy(host, src, bytes); }

  /// Returns the blocks kept for reuse to the system.
  static void release_cached() { detail::host_block_cache::instance().release(); }

  static std::size_t rounded(std::size_t bytes) {
    return bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
  }
};

/// Lowers expressions to code for a device: `executor<Device>::assign(view, expression)`.
/// Specialised by the backends (cpu/assign.hpp, cuda/attn/cuda/assign.cuh).
template <class Device>
struct executor;

}  // namespace attn
