// The CUDA execution model on the CPU, for testing kernels where no GPU is: a kernel header
// compiled by a host compiler after this one runs its blocks one after another, each thread of a
// block a fiber (ucontext) on the calling thread, switched at __syncthreads and at warp
// collectives (shuffles, and the tensor-core instructions' twins in mma.cuh: mma.sync, ldmatrix,
// cvt), which exchange the lanes' registers as the PTX ISA lays them out. Async copies
// (async_copy.cuh's cp.async) land when a wait covers them, garbage until then, or, with
// async_copies_land_early(), also at the first __syncthreads after their issue: a copy may land
// any time before its wait, and a kernel that uses its destination meanwhile (stages other rows
// there) reads them overwritten, as it may on a GPU. Global memory is host
// memory, so AddressSanitizer sees a kernel's out-of-bounds accesses (compute-sanitizer's
// memcheck, on the CPU); a block's __shared__ arrays are `static`, and its dynamic shared memory
// a heap buffer of the launch's size. A __syncthreads that some threads never reach, a warp
// collective left by one of its lanes and lanes at different collectives throw instead of
// hanging.
//
// A block's dynamic shared memory holds a pattern (NaN as floats) when it starts, so a kernel that
// reads what it did not write sees garbage, as on a GPU. Threads take their turns first to last,
// or last to first with threads_in_reverse(): a race between two of them (shared memory written
// by one and read by another with no barrier between) gives different results in the two orders.
// Built with ThreadSanitizer (-fsanitize=thread), the emulator reports such a race in either
// order, whatever the numbers: the threads are TSan fibers, ordered only by what orders them on
// a GPU (below, ATTN_EMULATOR_TSAN).
//
// What it does not tell: anything about speed, register spills or the hardware's limits (shared
// memory, threads a block); without ThreadSanitizer, a race that the two orders both hide (the
// fibers switch only where the kernel synchronises, so each runs alone between two barriers, an
// interleaving the hardware may not choose); races between blocks; under ThreadSanitizer, a race
// with an async copy in flight (TSan sees its write at its issue and at its wait, not between),
// or with an access older than the few TSan remembers of each 8 bytes; the exact bits of a
// tensor-core sum (each mma here adds its 16 products and the accumulator in double, rounded
// once); stale static shared memory (`__shared__` arrays are static variables, which keep the
// previous block's numbers).
// Device code sees ATTN_CUDA_EMULATOR; nvcc must never see this header. Kernels carry nvcc's
// `#pragma unroll`, which g++ warns about whatever a diagnostic pragma says: compile their
// emulation with -Wno-unknown-pragmas.
#pragma once

#if defined(__CUDACC__)
#error "attn/cuda/emulator.hpp runs kernels on the CPU: include it from code a host compiler builds"
#endif

#define ATTN_CUDA_EMULATOR 1

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <cstdlib>
#include <tuple>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <attn/core/float16.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define ATTN_EMULATOR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_EMULATOR_ASAN 1
#endif
#endif
#if defined(ATTN_EMULATOR_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// Under ThreadSanitizer each thread's fiber is a TSan fiber, switched without synchronising, and
// the synchronisation a GPU gives is told to TSan: a launch's start and end, __syncthreads and
// __syncwarp. Two threads of a block that touch the same memory, one of them writing, with
// none of these between them, are reported as a data race (with the exceptions in the header's
// first comment): compute-sanitizer's racecheck, on the CPU, and for global memory as well as
// shared. A thread's exit counts as its arrival at the next barrier. The emulator's own
// bookkeeping is hidden from TSan. Blocks run one after another and each starts after the last
// ended, so races between blocks (which a GPU runs at once) are not seen.
#if defined(__SANITIZE_THREAD__)
#define ATTN_EMULATOR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ATTN_EMULATOR_TSAN 1
#endif
#endif
#if defined(ATTN_EMULATOR_TSAN)
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_ignore_thread_begin();  // the runtime's, not in GCC 12's header
extern "C" void __tsan_ignore_thread_end();
// Neither its memory accesses nor its calls and returns instrumented (clang's no_sanitize keeps
// the latter).
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define ATTN_EMULATOR_NOT_RACE_CHECKED __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#if !defined(ATTN_EMULATOR_NOT_RACE_CHECKED)
#define ATTN_EMULATOR_NOT_RACE_CHECKED __attribute__((no_sanitize("thread")))
#endif
#else
#define ATTN_EMULATOR_NOT_RACE_CHECKED
#endif

// CUDA's vector and launch types, in the global namespace as CUDA has them.
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT: as CUDA's
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};

namespace attn::cuda_emulator {

inline constexpr unsigned warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;

/// A kernel's mistake the hardware would hang on or leave undefined: a barrier some threads never
/// reach, a warp collective that not every lane takes.
class kernel_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Whether async copies land at the first __syncthreads after their issue too (their wait then
/// writes them again), not only at their wait: the two ends of when a GPU may land them. Off by
/// default; tests of a pipelined kernel run both ways.
inline bool& async_copies_land_early() {
  static bool early = false;
  return early;
}

/// Whether a grid's blocks run last to first instead of first to last. A GPU runs them in any
/// order: a kernel whose last block to finish does the rest (a counter of finished blocks) is
/// tested both ways. Off by default.
inline bool& blocks_in_reverse() {
  static bool reverse = false;
  return reverse;
}

/// Whether a block's threads take their turns last to first instead of first to last: between
/// two of its barriers (or a warp's collectives) each thread runs alone, in that order. A kernel
/// with a race, a thread reading shared memory that another writes before the barrier that
/// would order them, reads the other's number in one order and the old one in the other: its
/// results differ between the two runs (the emulator tells no race otherwise). Off by default;
/// ATTN_EMULATOR_THREADS_IN_REVERSE=1 in the environment turns it on for a whole test program.
inline bool& threads_in_reverse() {
  static bool reverse = [] {
    const char* value = std::getenv("ATTN_EMULATOR_THREADS_IN_REVERSE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return reverse;
}

/// threads_in_reverse() set to `reverse` until the end of the scope, then back to what it was
/// (which ATTN_EMULATOR_THREADS_IN_REVERSE may have set for the whole program).
class threads_in_reverse_while {
 public:
  explicit threads_in_reverse_while(bool reverse) : before_(threads_in_reverse()) { threads_in_reverse() = reverse; }
  ~threads_in_reverse_while() { threads_in_reverse() = before_; }
  threads_in_reverse_while(const threads_in_reverse_while&) = delete;
  threads_in_reverse_while& operator=(const threads_in_reverse_while&) = delete;

 private:
  bool before_;
};

// The emulator's own work (switching fibers, exchanging and multiplying the lanes' registers)
// is optimised even in a build at -O0, as the sanitizers' is: the kernels it runs stay as built.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O2")
#endif

namespace detail {

/// A fiber's saved registers, and the switch between two fibers' stacks. On x86-64 the
/// callee-saved registers, the SSE and x87 control words and the stack pointer, switched by a
/// few instructions; elsewhere, or with ATTN_EMULATOR_UCONTEXT defined (a CPU that enforces a
/// shadow stack, which the switch's return to a saved address would offend), ucontext, whose
/// every switch is a system call (the signal mask).
/// Under ThreadSanitizer, tells it that `race_fiber` runs from here: switch_context's first step.
/// Not instrumented, nor is switch_context: an instrumented caller of __tsan_switch_to_fiber would
/// leave its entry on one fiber's shadow call stack and take its exit off the other's.
ATTN_EMULATOR_NOT_RACE_CHECKED inline void announce_switch([[maybe_unused]] void* race_fiber) {
#if defined(ATTN_EMULATOR_TSAN)
  __tsan_switch_to_fiber(race_fiber, __tsan_switch_to_fiber_no_sync);  // no edge: the threads run at once on a GPU
#endif
}

#if defined(__x86_64__) && !defined(ATTN_EMULATOR_UCONTEXT)
struct context {
  void* stack_pointer = nullptr;
};

/// Saves the caller's registers on its stack and its stack pointer in *save, then continues
/// where `load` was saved (System V ABI: save in rdi, load in rsi).
[[gnu::naked, gnu::noinline]] inline void switch_stack(void** /*save*/, void* /*load*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

/// Where a new fiber's first switch returns to: entry(argument), from r13 and r12.
[[gnu::naked, gnu::noinline]] inline void fiber_start() {
  asm volatile(
      "movq %r12, %rdi\n\t"
      "callq *%r13\n\t"
      "ud2\n\t");
}

/// A context that, switched to, calls entry(argument) on the stack [stack, stack + bytes).
inline void make_context(context& c, void* stack, std::size_t bytes, void (*entry)(long), long argument) {
  auto* top = reinterpret_cast<std::uint64_t*>((reinterpret_cast<std::uintptr_t>(stack) + bytes) / 16 * 16);
  std::uint32_t mxcsr = 0;
  std::uint16_t x87 = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87));
  // From the top: the return address into fiber_start (popped, it leaves the stack 16-byte
  // aligned for fiber_start's call), rbp, rbx, r12, r13, r14, r15, the control words.
  std::uint64_t* frame = top - 8;
  frame[7] = reinterpret_cast<std::uint64_t>(&fiber_start);
  frame[6] = 0;                                       // rbp
  frame[5] = 0;                                       // rbx
  frame[4] = static_cast<std::uint64_t>(argument);    // r12
  frame[3] = reinterpret_cast<std::uint64_t>(entry);  // r13
  frame[2] = 0;                                       // r14
  frame[1] = 0;                                       // r15
  frame[0] = std::uint64_t(mxcsr) | std::uint64_t(x87) << 32;
  c.stack_pointer = frame;
}

/// Switches to `load`, ThreadSanitizer's `race_fiber` with it. Not instrumented: it reads the next
/// fiber's context once TSan counts that fiber as running.
ATTN_EMULATOR_NOT_RACE_CHECKED inline void switch_context(context& save, const context& load, void* race_fiber) {
  announce_switch(race_fiber);
  switch_stack(&save.stack_pointer, load.stack_pointer);
}
#else
struct context {
  ucontext_t registers{};
};

inline void make_context(context& c, void* stack, std::size_t bytes, void (*entry)(long), long argument) {
  getcontext(&c.registers);
  c.registers.uc_stack.ss_sp = stack;
  c.registers.uc_stack.ss_size = bytes;
  c.registers.uc_link = nullptr;
  makecontext(&c.registers, reinterpret_cast<void (*)()>(entry), 1, argument);
}

ATTN_EMULATOR_NOT_RACE_CHECKED inline void switch_context(context& save, const context& load, void* race_fiber) {
  announce_switch(race_fiber);
  swapcontext(&save.registers, &load.registers);
}
#endif

/// What ThreadSanitizer is told (nothing in a build without it): the fibers (their switches:
/// announce_switch) and the synchronisation between them. hide() and show() bracket the
/// emulator's bookkeeping, which every thread touches and a GPU does not have.
namespace tsan {
#if defined(ATTN_EMULATOR_TSAN)
// Never destroyed: the runner lives until the program ends, and a fiber that exited stays hidden
// (below) until its next block, which TSan would report as ignores left enabled.
inline void* new_fiber() { return __tsan_create_fiber(0); }
inline void* this_fiber() { return __tsan_get_current_fiber(); }
inline void release(void* sync) { __tsan_release(sync); }
inline void acquire(void* sync) { __tsan_acquire(sync); }
inline void hide() { __tsan_ignore_thread_begin(); }
inline void show() { __tsan_ignore_thread_end(); }
#else
inline void* new_fiber() { return nullptr; }
inline void* this_fiber() { return nullptr; }
inline void release(void*) {}
inline void acquire(void*) {}
inline void hide() {}
inline void show() {}
#endif
}  // namespace tsan

/// One CUDA thread: a fiber with its own stack.
struct fiber {
  enum class state { runnable, at_barrier, at_warp_collective, done };
  detail::context context;
  void* stack = nullptr;
  uint3 index;
  unsigned lane = 0, warp = 0;
  state now = state::runnable;
  unsigned collective = 0;  // the generation of the warp collective it waits at
  void* fake_stack = nullptr;  // AddressSanitizer's, while switched away
  void* race_fiber = nullptr;  // ThreadSanitizer's
  bool hidden = false;         // in the emulator's bookkeeping, hidden from ThreadSanitizer
  // Its async copies (cp.async) not yet done: their sources read at issue, written to shared
  // memory when a wait covers their group; the ends of its committed groups in that list.
  struct async_copy {
    void* to;
    std::size_t bytes;
    unsigned char data[16];
  };
  std::vector<async_copy> async_copies;
  std::vector<std::size_t> async_group_ends;
};

/// A warp's exchange: each lane's bytes for one collective and the result each gets,
/// double-buffered by generation (a lane can reach the collective after next only when every
/// lane has read this one's result).
struct warp_exchange {
  static constexpr std::size_t bytes = 64;
  alignas(16) std::byte slots[2][warp_size][bytes];
  alignas(16) std::byte results[2][warp_size][bytes];
  const char* tags[2][warp_size];
  unsigned arrived = 0, generation = 0;
  // ThreadSanitizer's stand-ins for __syncwarp, a generation each: a lane that arrives at the
  // next must not give its accesses to one that leaves this one late.
  char sync[2];
};

/// Runs one block of a launch at a time.
class block_runner {
 public:
  static constexpr std::size_t stack_bytes = std::size_t{512} << 10;

  static constexpr std::size_t guard_bytes = std::size_t{64} << 10;  // whole pages on every x86-64 and ARM kernel

  ~block_runner() {
    for (auto& f : fibers_) {
      if (!f.stack) continue;
#if defined(ATTN_EMULATOR_ASAN)
      // A fiber's frames that never returned leave their redzones poisoned, and the shadow
      // outlives the mapping: LeakSanitizer's thread, its stack mapped here at exit, once saw
      // its own locals as a stack-buffer-overflow and hung reporting it instead of the leaks.
      __asan_unpoison_memory_region(f.stack, stack_bytes);
#endif
      munmap(static_cast<char*>(f.stack) - guard_bytes, guard_bytes + stack_bytes);
    }
  }

  static block_runner& instance() {
    static block_runner runner;
    return runner;
  }

  void run(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& body) {
    const std::size_t threads = std::size_t(block.x) * block.y * block.z;
    // The limits of every GPU since compute capability 3.0: more is cudaErrorInvalidConfiguration.
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
      throw kernel_error("attn::cuda_emulator::launch: a block of " + std::to_string(block.x) + " x " +
                         std::to_string(block.y) + " x " + std::to_string(block.z) + " threads (1 to 1024, z at most 64)" +
                         " and a grid of " + std::to_string(grid.x) + " x " + std::to_string(grid.y) + " x " +
                         std::to_string(grid.z) + " blocks (none empty; y and z at most 65535, x 2^31 - 1)");
    if (running_) throw kernel_error("attn::cuda_emulator::launch: a kernel launched from a kernel");
    running_ = true;
    struct stop {
      bool& running;
      ~stop() { running = false; }
    } stopping{running_};
    grid_ = grid;
    block_ = block;
    body_ = &body;
    while (fibers_.size() < threads) {  // each stack above a page that faults: an overflow stops there
      fibers_.emplace_back();
      void* mapping = mmap(nullptr, guard_bytes + stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mapping == MAP_FAILED) throw std::bad_alloc();
      mprotect(mapping, guard_bytes, PROT_NONE);
      fibers_.back().stack = static_cast<char*>(mapping) + guard_bytes;
      fibers_.back().race_fiber = tsan::new_fiber();
    }
    threads_ = threads;
    warps_.assign((threads + warp_size - 1) / warp_size, warp_exchange{});
    shared_.resize(shared_bytes + 16);
    const auto nth = [&](unsigned i, unsigned extent) { return blocks_in_reverse() ? extent - 1 - i : i; };
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) run_block(uint3{nth(x, grid.x), nth(y, grid.y), nth(z, grid.z)});
  }

  const uint3& thread_index() const { return current_->index; }
  const uint3& block_index() const { return block_index_; }
  const dim3& block_size() const { return block_; }
  const dim3& grid_size() const { return grid_; }
  void* dynamic_shared() { return shared_.empty() ? nullptr : align16(shared_.data()); }

  /// cp.async: the source is read now; the destination holds 0xff bytes (NaN as floats) until a
  /// wait covers the copy's group, so that a kernel that reads it before waiting sees garbage,
  /// as it may on a GPU.
  void copy_async(void* to, const void* from, std::size_t bytes) {
    if (reinterpret_cast<std::uintptr_t>(to) % bytes != 0 || reinterpret_cast<std::uintptr_t>(from) % bytes != 0)
      throw kernel_error("attn::cuda_emulator: cp.async of " + std::to_string(bytes) +
                         " bytes with an address not aligned to them (misaligned on a GPU)");
    fiber::async_copy copy{to, bytes, {}};
    std::memcpy(copy.data, from, bytes);
    std::memset(to, 0xff, bytes);
    current_->async_copies.push_back(copy);
  }
  /// cp.async.commit_group: the copies issued since the last commit make a group.
  void commit_async_copies() { current_->async_group_ends.push_back(current_->async_copies.size()); }
  /// cp.async.wait_group: finishes every committed group but the `pending` newest.
  void wait_async_copies(std::size_t pending) {
    fiber& f = *current_;
    if (f.async_group_ends.size() <= pending) return;
    const std::size_t groups = f.async_group_ends.size() - pending, done = f.async_group_ends[groups - 1];
    for (std::size_t c = 0; c < done; ++c) {
      const auto& copy = f.async_copies[c];
      std::memcpy(copy.to, copy.data, copy.bytes);
    }
    f.async_copies.erase(f.async_copies.begin(), f.async_copies.begin() + std::ptrdiff_t(done));
    f.async_group_ends.erase(f.async_group_ends.begin(), f.async_group_ends.begin() + std::ptrdiff_t(groups));
    for (auto& end : f.async_group_ends) end -= done;
  }

  /// __syncthreads: waits until every thread of the block that has not exited arrives.
  void barrier() {
    fiber& f = *current_;
    const bookkeeping hidden(f);
    // This barrier's, not the next one's, which a thread that arrives there first releases to
    // while others have not left this one yet: two, used in turn.
    char* const sync = &barrier_sync_[barriers_passed_ % 2];
    tsan::release(sync);
    f.now = fiber::state::at_barrier;
    ++at_barrier_;
    if (release_barrier_if_complete()) {
      // The last to arrive: the threads' turns start again from the first that has not exited
      // (the last, in reverse), which may be this one.
      if (fiber* first = first_runnable(); first != &f) yield_to(first);
    } else {
      yield();
    }
    tsan::acquire(sync);
  }

  /// A warp collective: every lane gives `mine` under the same tag; the last lane to arrive
  /// calls compute(values, results) once, values[l] lane l's, and each lane returns results[its
  /// lane]. Value and Result: trivially copyable, at most warp_exchange::bytes. `orders_memory`:
  /// whether the lanes' memory accesses before it happen before those after it (__syncwarp's
  /// promise; a shuffle's or an mma's is only the values it exchanges).
  template <class Result, class Value, class Compute>
  Result collective(const char* tag, unsigned mask, const Value& mine, Compute&& compute, bool orders_memory = false) {
    static_assert(std::is_trivially_copyable_v<Value> && sizeof(Value) <= warp_exchange::bytes);
    static_assert(std::is_trivially_copyable_v<Result> && sizeof(Result) <= warp_exchange::bytes);
    fiber& f = *current_;
    const bookkeeping hidden(f);
    if (mask != full_mask)
      throw kernel_error(std::string("attn::cuda_emulator: ") + tag + " with mask " + std::to_string(mask) +
                         ": only whole warps (0xffffffff) are emulated");
    if (lanes_of(f.warp) != warp_size)
      throw kernel_error(std::string("attn::cuda_emulator: ") + tag + " in a warp of " +
                         std::to_string(lanes_of(f.warp)) + " threads: a block of " + std::to_string(threads_) +
                         " is not whole warps");
    warp_exchange& w = warps_[f.warp];
    const unsigned buffer = w.generation % 2;
    if (orders_memory) tsan::release(&w.sync[buffer]);
    std::memcpy(w.slots[buffer][f.lane], &mine, sizeof(Value));
    w.tags[buffer][f.lane] = tag;
    if (w.arrived + 1 == warp_size) {  // the last: every lane's value is here
      for (unsigned lane = 0; lane < warp_size; ++lane)
        if (std::strcmp(w.tags[buffer][lane], tag) != 0)
          throw kernel_error("attn::cuda_emulator: warp " + std::to_string(f.warp) + " of block " + block_name() +
                             ": lane " + std::to_string(f.lane) + " at " + tag + ", lane " + std::to_string(lane) +
                             " at " + w.tags[buffer][lane]);
      Value values[warp_size];
      Result results[warp_size];
      for (unsigned lane = 0; lane < warp_size; ++lane) std::memcpy(&values[lane], w.slots[buffer][lane], sizeof(Value));
      compute(static_cast<const Value(&)[warp_size]>(values), results);
      for (unsigned lane = 0; lane < warp_size; ++lane) std::memcpy(w.results[buffer][lane], &results[lane], sizeof(Result));
    }
    f.now = fiber::state::at_warp_collective;
    f.collective = w.generation;
    ++w.arrived;
    if (release_warp_if_complete(f.warp)) {
      // The last lane to arrive: the warp's turns start again from its first lane (its last, in
      // reverse), as after a barrier.
      fiber& first = fibers_[std::size_t(f.warp) * warp_size + (reverse_ ? warp_size - 1 : 0)];
      if (&first != &f) yield_to(&first);
    } else {
      yield();
    }
    if (orders_memory) tsan::acquire(&w.sync[buffer]);
    Result mine_out;
    std::memcpy(&mine_out, w.results[buffer][f.lane], sizeof(Result));
    return mine_out;
  }

 private:
  /// The emulator's own reads and writes, hidden from ThreadSanitizer while it lives: a fiber
  /// that switches away inside it is still hidden when it comes back, and one abandoned there (a
  /// block that failed) is shown again when its next block starts (entry).
  class bookkeeping {
   public:
    explicit bookkeeping(fiber& f) : f_(f) {
      tsan::hide();
      f_.hidden = true;
    }
    ~bookkeeping() {
      f_.hidden = false;
      tsan::show();
    }
    bookkeeping(const bookkeeping&) = delete;
    bookkeeping& operator=(const bookkeeping&) = delete;

   private:
    fiber& f_;
  };

  static void* align16(std::byte* p) {
    return reinterpret_cast<void*>((reinterpret_cast<std::uintptr_t>(p) + 15) / 16 * 16);
  }

  unsigned lanes_of(unsigned warp) const {
    return unsigned(std::min<std::size_t>(warp_size, threads_ - std::size_t(warp) * warp_size));
  }

  std::string block_name() const {
    return "(" + std::to_string(block_index_.x) + ", " + std::to_string(block_index_.y) + ", " +
           std::to_string(block_index_.z) + ")";
  }

  /// Releases the threads at the barrier once every thread has arrived or exited; whether it did.
  bool release_barrier_if_complete() {
    if (at_barrier_ == 0 || at_barrier_ + exited_ < threads_) return false;
    for (std::size_t t = 0; t < threads_; ++t) {
      fiber& f = fibers_[t];
      if (f.now == fiber::state::at_barrier) f.now = fiber::state::runnable;
      if (async_copies_land_early())  // each still lands again at its wait
        for (const auto& copy : f.async_copies) std::memcpy(copy.to, copy.data, copy.bytes);
    }
    at_barrier_ = 0;
    ++barriers_passed_;
    return true;
  }

  /// Releases the warp's lanes once all have arrived at its collective; whether it did.
  bool release_warp_if_complete(unsigned warp) {
    warp_exchange& w = warps_[warp];
    if (w.arrived < lanes_of(warp)) return false;
    for (unsigned lane = 0; lane < lanes_of(warp); ++lane) {
      fiber& f = fibers_[std::size_t(warp) * warp_size + lane];
      if (f.now == fiber::state::at_warp_collective && f.collective == w.generation) f.now = fiber::state::runnable;
    }
    w.arrived = 0;
    ++w.generation;
    return true;
  }

  void run_block(uint3 index) {
    block_index_ = index;
    at_barrier_ = exited_ = 0;
    // Dynamic shared memory: filled with a pattern (NaN as floats) for each block, as it is not
    // zeroed on a GPU, and a block finds there what an earlier one left (or anything else).
    std::fill(shared_.begin(), shared_.end(), std::byte{0xff});
    for (auto& w : warps_) w.arrived = 0, w.generation = 0;
    for (std::size_t t = 0; t < threads_; ++t) {
      fiber& f = fibers_[t];
      f.index = uint3{unsigned(t % block_.x), unsigned(t / block_.x % block_.y),
                      unsigned(t / (std::size_t(block_.x) * block_.y))};
      f.lane = unsigned(t % warp_size);
      f.warp = unsigned(t / warp_size);
      f.now = fiber::state::runnable;
      f.async_copies.clear(), f.async_group_ends.clear();
#if defined(ATTN_EMULATOR_ASAN)
      // A fiber abandoned mid-call (a kernel that threw or got stuck) left its frames' redzones
      // poisoned on this stack.
      __asan_unpoison_memory_region(f.stack, stack_bytes);
#endif
      make_context(f.context, f.stack, stack_bytes, &block_runner::entry, long(t));
    }
    failure_ = nullptr;
    // The threads switch among themselves; the block comes back here when none can run.
    reverse_ = threads_in_reverse();
    fiber& first = fibers_[reverse_ ? threads_ - 1 : 0];
    current_ = &first;
    // What the launcher did (the kernel's arguments, the memory it copied) happens before the
    // block, and the block (its threads until they exit, or until they are abandoned) before what
    // the launcher does next.
    launcher_race_fiber_ = tsan::this_fiber();
    tsan::release(&block_sync_);
#if defined(ATTN_EMULATOR_ASAN)
    void* fake = nullptr;
    entered_from_launcher_ = true;
    __sanitizer_start_switch_fiber(&fake, first.stack, stack_bytes);
#endif
    switch_context(launcher_, first.context, first.race_fiber);
#if defined(ATTN_EMULATOR_ASAN)
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    tsan::acquire(&launcher_sync_);
    current_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
    if (exited_ != threads_)
      throw kernel_error("attn::cuda_emulator: block " + block_name() + " cannot go on: " + waiting());
  }

  /// What the threads of a stuck block wait for.
  std::string waiting() const {
    std::size_t barrier = 0, done = 0;
    std::string collectives;
    for (std::size_t t = 0; t < threads_; ++t) {
      const fiber& f = fibers_[t];
      barrier += f.now == fiber::state::at_barrier;
      done += f.now == fiber::state::done;
      if (f.now == fiber::state::at_warp_collective && collectives.size() < 200)
        collectives += " thread " + std::to_string(t) + " at " +
                       warps_[f.warp].tags[f.collective % 2][f.lane] + ";";
    }
    return std::to_string(barrier) + " threads at __syncthreads, " + std::to_string(done) + " exited," +
           (collectives.empty() ? std::string(" none at a warp collective") : collectives) +
           " (a barrier or collective some threads never reach)";
  }

  /// The first thread that can run (the last, when the threads take their turns in reverse);
  /// null when none can.
  fiber* first_runnable() {
    for (std::size_t k = 0; k < threads_; ++k) {
      fiber& f = fibers_[reverse_ ? threads_ - 1 - k : k];
      if (f.now == fiber::state::runnable) return &f;
    }
    return nullptr;
  }

  /// The next thread after the current one that can run, round robin (before it, when the
  /// threads take their turns in reverse); null when none can.
  fiber* next_runnable() {
    const std::size_t me = std::size_t(current_ - fibers_.data());
    for (std::size_t k = 1; k <= threads_; ++k) {
      fiber& f = fibers_[(reverse_ ? me + threads_ - k : me + k) % threads_];
      if (f.now == fiber::state::runnable) return &f;
    }
    return nullptr;
  }

  // Not instrumented by ThreadSanitizer: it never returns, and each block's call would stay on
  // the fiber's shadow stack (the kernel it calls is).
  ATTN_EMULATOR_NOT_RACE_CHECKED static void entry(long t) {
    block_runner& self = instance();
    tsan::acquire(&self.block_sync_);
    fiber& f = self.fibers_[std::size_t(t)];
    if (f.hidden) {  // since its last block's exit, or abandoned in a block that failed
      f.hidden = false;
      tsan::show();
    }
#if defined(ATTN_EMULATOR_ASAN)
    const void* from_bottom = nullptr;
    std::size_t from_size = 0;
    __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
    if (self.entered_from_launcher_) {
      self.launcher_stack_bottom_ = from_bottom, self.launcher_stack_size_ = from_size;
      self.entered_from_launcher_ = false;
    }
#endif
    try {
      (*self.body_)();
      // On a GPU the block's shared memory may go to the next block while copies still land.
      if (!f.async_copies.empty())
        throw kernel_error("attn::cuda_emulator: thread " + std::to_string(t) + " of block " + self.block_name() +
                           " exited with " + std::to_string(f.async_copies.size()) +
                           " async copies (cp.async) not waited for");
    } catch (...) {
      self.failure_ = std::current_exception();
    }
    tsan::release(&self.launcher_sync_);
    // An exit counts as an arrival at the barrier the others wait at or will: its accesses
    // happen before theirs after it, as for a thread that arrived.
    tsan::release(&self.barrier_sync_[self.barriers_passed_ % 2]);
    tsan::hide();  // until its next block's entry
    f.hidden = true;
    f.now = fiber::state::done;
    ++self.exited_;
    // An exit completes a barrier the others wait at (exited threads count as arrived); it
    // leaves a warp collective its lanes wait at forever, which run_block reports.
    const bool released = self.release_barrier_if_complete();
    fiber* next = self.failure_ ? nullptr : released ? self.first_runnable() : self.next_runnable();
    context abandoned;
    if (next) {
      self.current_ = next;
#if defined(ATTN_EMULATOR_ASAN)
      __sanitizer_start_switch_fiber(nullptr, next->stack, stack_bytes);
#endif
      switch_context(abandoned, next->context, next->race_fiber);
    } else {
#if defined(ATTN_EMULATOR_ASAN)
      __sanitizer_start_switch_fiber(nullptr, self.launcher_stack_bottom_, self.launcher_stack_size_);
#endif
      switch_context(abandoned, self.launcher_, self.launcher_race_fiber_);
    }
  }

  /// Lets the other threads run until this one is runnable again.
  void yield() { yield_to(next_runnable()); }

  /// The same, `next` first (null: none can run).
  void yield_to(fiber* next) {
    fiber& me = *current_;
    tsan::release(&launcher_sync_);  // the launcher may be next: this thread may never run again
#if defined(ATTN_EMULATOR_ASAN)
    if (next) __sanitizer_start_switch_fiber(&me.fake_stack, next->stack, stack_bytes);
    else __sanitizer_start_switch_fiber(&me.fake_stack, launcher_stack_bottom_, launcher_stack_size_);
#endif
    if (next) {
      current_ = next;
      switch_context(me.context, next->context, next->race_fiber);
    } else {
      switch_context(me.context, launcher_, launcher_race_fiber_);  // stuck: run_block reports it
    }
#if defined(ATTN_EMULATOR_ASAN)
    __sanitizer_finish_switch_fiber(me.fake_stack, nullptr, nullptr);
#endif
  }

  std::vector<fiber> fibers_;
  std::vector<warp_exchange> warps_;
  std::vector<std::byte> shared_;
  std::size_t threads_ = 0, at_barrier_ = 0, exited_ = 0, barriers_passed_ = 0;
  dim3 grid_, block_;
  uint3 block_index_;
  const std::function<void()>* body_ = nullptr;
  fiber* current_ = nullptr;
  context launcher_;  // the launching thread's
  std::exception_ptr failure_;
  bool running_ = false;
  bool reverse_ = false;  // threads_in_reverse(), for the block that runs
  // ThreadSanitizer's: the launcher's fiber, and the addresses that stand for a block's start,
  // for the launcher's return, and for __syncthreads (never read or written).
  void* launcher_race_fiber_ = nullptr;
  char block_sync_ = 0, launcher_sync_ = 0, barrier_sync_[2] = {};
#if defined(ATTN_EMULATOR_ASAN)
  bool entered_from_launcher_ = false;  // the launcher's stack, for AddressSanitizer's fiber switches
  const void* launcher_stack_bottom_ = nullptr;
  std::size_t launcher_stack_size_ = 0;
#endif
};

}  // namespace detail

/// kernel<<<grid, block, shared_bytes>>>(args...): every block, one after another; returns when
/// the last has finished (launches are synchronous here). Arguments are copied as CUDA copies a
/// kernel's parameters.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "attn::cuda_emulator::launch: the kernel's arguments");
  const std::tuple<std::remove_cvref_t<Params>...> parameters(std::forward<Args>(args)...);
  const std::function<void()> body = [&] { std::apply(kernel, parameters); };
  detail::block_runner::instance().run(grid, block, shared_bytes, body);
}

/// A launcher's Runtime (fused_attention_launch.cuh) on the emulator: launch.cuh's
/// device_runtime with host memory, which also holds a launch to the GPU's rules on dynamic
/// shared memory (above 48 KiB only after allow_shared_memory; at most shared_memory_limit(),
/// sm_90's 227 KiB unless a test sets less).
struct runtime {
  static constexpr std::size_t default_shared_bytes = std::size_t{48} << 10;
  static constexpr std::size_t most_shared_bytes = std::size_t{227} << 10;
  static constexpr std::size_t most_row_gradient_bytes = std::size_t{256} << 20;  // device_runtime's

  template <class... Params, class... Args>
  static void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
    const auto allowed = allowances().find(reinterpret_cast<const void*>(kernel));
    const std::size_t limit = std::min(allowed != allowances().end() ? allowed->second : default_shared_bytes,
                                       shared_memory_limit());
    if (shared_bytes > limit)
      throw kernel_error("attn::cuda_emulator::runtime: a launch with " + std::to_string(shared_bytes) +
                         " bytes of dynamic shared memory, and the kernel allows " + std::to_string(limit) +
                         " (cudaFuncSetAttribute first: cudaErrorInvalidValue on a GPU)");
    cuda_emulator::launch(kernel, grid, block, shared_bytes, std::forward<Args>(args)...);
  }

  struct free_memory {
    void operator()(void* p) const { std::free(p); }
  };
  static std::unique_ptr<void, free_memory> scratch(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);  // cudaMalloc's alignment
    if (!p) throw std::bad_alloc();
    std::memset(p, 0xff, bytes);  // not zeroed on a GPU either
    return std::unique_ptr<void, free_memory>(p);
  }

  static void zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }

  template <class... Params>
  static void allow_shared_memory(void (*kernel)(Params...), int bytes) {
    if (bytes < 0 || std::size_t(bytes) > shared_memory_limit())
      throw kernel_error("attn::cuda_emulator::runtime: " + std::to_string(bytes) +
                         " bytes of dynamic shared memory asked for; the emulated GPU's block has at most " +
                         std::to_string(shared_memory_limit()));
    allowances()[reinterpret_cast<const void*>(kernel)] = std::size_t(bytes);
  }

  /// The most dynamic shared memory a block may ask for: an sm_90's (most_shared_bytes) unless a
  /// test emulates a smaller GPU (99 KiB for compute capability 8.6, 8.9 and 12.x).
  static std::size_t& shared_memory_limit() {
    static std::size_t bytes = most_shared_bytes;
    return bytes;
  }

  /// device_runtime's scratch for fused attention's learned inputs' gradients (256 MiB) unless a
  /// test sets less, so that a few short sentences take the launches that 256 MiB would split.
  static std::size_t& row_gradient_limit() {
    static std::size_t bytes = most_row_gradient_bytes;
    return bytes;
  }

 private:
  static std::map<const void*, std::size_t>& allowances() {
    static std::map<const void*, std::size_t> by_kernel;
    return by_kernel;
  }
};

/// The block's dynamic shared memory (`extern __shared__` on a GPU), 16-byte aligned.
inline void* dynamic_shared_memory() { return detail::block_runner::instance().dynamic_shared(); }

/// A warp collective (see block_runner::collective).
template <class Result, class Value, class Compute>
Result warp_collective(const char* tag, const Value& mine, Compute&& compute) {
  return detail::block_runner::instance().collective<Result>(tag, full_mask, mine, std::forward<Compute>(compute));
}

/// The PTX instructions mma.cuh uses, as the PTX ISA defines them ("Matrix fragments for
/// mma.m16n8k16 with floating point type", "ldmatrix", "cvt"), with g = lane / 4, t = lane % 4.
namespace ptx {

/// Every 16-bit number's value, exact in double, indexed by its bits (the emulated tensor-core
/// tests widened 384 numbers a product, a ninth of their time, one at a time).
template <class T>
const double* values() {
  static const std::vector<double> all = [] {
    std::vector<double> v(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) v[b] = double(float(T::from_bits(std::uint16_t(b))));
    return v;
  }();
  return all.data();
}
inline std::uint16_t half_of(std::uint32_t word, int high) { return std::uint16_t(high ? word >> 16 : word & 0xffffu); }

/// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.f32: D = A·B + C over the warp.
/// A (16 × 16): a_i, i = 0…7 (register i / 2, the low half first), at row g + 8·(i % 4 ≥ 2) and
/// column 2t + i % 2 + 8·(i ≥ 4). B (16 × 8): b_i, i = 0…3, at row 2t + i % 2 + 8·(i ≥ 2), column g.
/// C, D (16 × 8): c_i, i = 0…3, at row g + 8·(i ≥ 2), column 2t + i % 2.
template <class T>
void mma_m16n8k16(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  struct registers {
    std::uint32_t a[4], b[2];
    float c[4];
  };
  struct accumulators {
    float c[4];
  };
  registers mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);
  const auto d = warp_collective<accumulators>(
      "mma.sync.m16n8k16", mine, [](const registers (&all)[warp_size], accumulators (&out)[warp_size]) {
        // D's 128 sums, each C then the 16 products in k's order, a row of D at a time: products
        // of two 16-bit numbers are exact in double, and the sums are rounded to float once.
        const double* value = values<T>();
        double A[16][16], B[16][8], D[16][8];
        for (unsigned l = 0; l < warp_size; ++l) {
          const int g = int(l) / 4, t = int(l) % 4;
          for (int i = 0; i < 8; ++i)
            A[g + 8 * (i % 4 >= 2)][2 * t + i % 2 + 8 * (i >= 4)] = value[half_of(all[l].a[i / 2], i % 2)];
          for (int i = 0; i < 4; ++i) B[2 * t + i % 2 + 8 * (i >= 2)][g] = value[half_of(all[l].b[i / 2], i % 2)];
          for (int i = 0; i < 4; ++i) D[g + 8 * (i >= 2)][2 * t + i % 2] = all[l].c[i];
        }
        // Four sums at a time in their own variables: one sum's additions wait on each other, four
        // overlap (a row's sums through memory took the emulated tensor-core tests' time).
        for (int row = 0; row < 16; ++row) {
          for (int column = 0; column < 8; column += 4) {
            double d0 = D[row][column], d1 = D[row][column + 1], d2 = D[row][column + 2], d3 = D[row][column + 3];
            for (int k = 0; k < 16; ++k) {
              const double a_k = A[row][k];
              d0 += a_k * B[k][column];
              d1 += a_k * B[k][column + 1];
              d2 += a_k * B[k][column + 2];
              d3 += a_k * B[k][column + 3];
            }
            D[row][column] = d0, D[row][column + 1] = d1, D[row][column + 2] = d2, D[row][column + 3] = d3;
          }
        }
        for (unsigned l = 0; l < warp_size; ++l) {
          const int g = int(l) / 4, t = int(l) % 4;
          for (int i = 0; i < 4; ++i) out[l].c[i] = float(D[g + 8 * (i >= 2)][2 * t + i % 2]);
        }
      });
  std::memcpy(c, d.c, sizeof d.c);
}

/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8m … 8m + 7 give the addresses of
/// rows 0–7 of matrix m; register m of lane l receives matrix m's elements (g, 2t) and (g, 2t + 1),
/// the first in the low half, or with .trans (2t, g) and (2t + 1, g).
template <bool transposed>
void ldmatrix_x4(std::uint32_t (&r)[4], const std::uint16_t* row) {
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0)
    throw kernel_error("attn::cuda_emulator: ldmatrix with a row address not 16-byte aligned (misaligned on a GPU)");
  struct registers {
    std::uint32_t r[4];
  };
  // Each lane reads the row it gives, so that ThreadSanitizer sees the read as that lane's.
  struct row_of_8 {
    std::uint16_t element[8];
    std::uint16_t operator[](unsigned column) const { return element[column]; }
  };
  row_of_8 mine;
  std::memcpy(mine.element, row, sizeof mine.element);
  const auto got = warp_collective<registers>(
      transposed ? "ldmatrix.x4.trans" : "ldmatrix.x4", mine,
      [](const row_of_8 (&rows)[warp_size], registers (&out)[warp_size]) {
        for (unsigned l = 0; l < warp_size; ++l) {
          const unsigned g = l / 4, t = l % 4;
          for (unsigned m = 0; m < 4; ++m) {
            const std::uint16_t low = transposed ? rows[8 * m + 2 * t][g] : rows[8 * m + g][2 * t];
            const std::uint16_t high = transposed ? rows[8 * m + 2 * t + 1][g] : rows[8 * m + g][2 * t + 1];
            out[l].r[m] = std::uint32_t(low) | std::uint32_t(high) << 16;
          }
        }
      });
  std::memcpy(r, got.r, sizeof got.r);
}

/// ex2.approx.ftz.f32: 2^x, a subnormal result flushed to zero. The GPU's is within 2 ulp
/// (tests/gpu/fast_exp2_test.cu), the host's exp2 within 1.
inline float ex2_approx_ftz(float x) {
  const float power = std::exp2(x);
  return std::fpclassify(power) == FP_SUBNORMAL ? 0.f : power;
}

/// cvt.rn.{bf16x2,f16x2}.f32 d, a, b: a rounded into the upper half of d, b into the lower.
template <class T>
std::uint32_t cvt_pack(float a, float b) {
  return std::uint32_t(T(a).bits) << 16 | std::uint32_t(T(b).bits);
}

}  // namespace ptx

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/// The kernel's view of the machine (threadIdx and the rest below).
inline const uint3& thread_index() { return detail::block_runner::instance().thread_index(); }
inline const uint3& block_index() { return detail::block_runner::instance().block_index(); }
inline const dim3& block_size() { return detail::block_runner::instance().block_size(); }
inline const dim3& grid_size() { return detail::block_runner::instance().grid_size(); }

}  // namespace attn::cuda_emulator

// CUDA's keywords and built-in variables.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one copy for the block that runs: blocks run one at a time
#define threadIdx (::attn::cuda_emulator::thread_index())
#define blockIdx (::attn::cuda_emulator::block_index())
#define blockDim (::attn::cuda_emulator::block_size())
#define gridDim (::attn::cuda_emulator::grid_size())

// The intrinsics attn's kernels call.
inline void __syncthreads() { ::attn::cuda_emulator::detail::block_runner::instance().barrier(); }
inline void __syncwarp(unsigned mask = ::attn::cuda_emulator::full_mask) {
  ::attn::cuda_emulator::detail::block_runner::instance().collective<int>(
      "__syncwarp", mask, 0, [](const int (&)[32], int (&out)[32]) { std::fill(out, out + 32, 0); },
      /*orders_memory=*/true);
}

namespace attn::cuda_emulator::detail {
/// A shuffle: lane l gets the value of lane source(l, its parameter), or its own where the source
/// falls outside its segment of `width` lanes.
template <class T, class Source>
T shuffle(const char* tag, unsigned mask, T value, int parameter, int width, Source source) {
  struct given {
    T value;
    int parameter;
  };
  return block_runner::instance().collective<T>(
      tag, mask, given{value, parameter}, [&](const given (&all)[warp_size], T (&out)[warp_size]) {
        for (unsigned l = 0; l < warp_size; ++l) {
          const int from = source(int(l), all[l].parameter);
          out[l] = from >= 0 && from < int(warp_size) && from / width == int(l) / width ? all[from].value : all[l].value;
        }
      });
}
}  // namespace attn::cuda_emulator::detail

template <class T>
T __shfl_sync(unsigned mask, T value, int source, int width = 32) {
  return ::attn::cuda_emulator::detail::shuffle("__shfl_sync", mask, value, source, width,
                                               [width](int l, int s) { return l / width * width + s % width; });
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  return ::attn::cuda_emulator::detail::shuffle("__shfl_xor_sync", mask, value, lane_mask, width,
                                               [](int l, int m) { return l ^ m; });
}
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  return ::attn::cuda_emulator::detail::shuffle("__shfl_down_sync", mask, value, int(delta), width,
                                               [](int l, int d) { return l + d; });
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
// Blocks and threads share one CPU thread here, so the compiler's reordering is all a fence has
// to stop. Not modelled for ThreadSanitizer (which takes no thread fences): the kernels fence
// only between blocks, which run one after another here.
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
// Atomic as the host knows them (fibers switch only at barriers and warp collectives, so plain
// read-modify-writes would do), for ThreadSanitizer to tell from plain accesses, and relaxed, as
// a GPU's are: an atomic orders nothing else, so TSan still sees a race between what two
// threads do around the same counter. Blocks run one after another in a fixed order (or its
// reverse), so float sums by atomics come out the same every run here, as they need not on a GPU.
inline unsigned atomicAdd(unsigned* p, unsigned value) {
  return std::atomic_ref<unsigned>(*p).fetch_add(value, std::memory_order_relaxed);
}
inline float atomicAdd(float* p, float value) {
  return std::atomic_ref<float>(*p).fetch_add(value, std::memory_order_relaxed);
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long value) {
  std::atomic_ref<unsigned long long> at(*p);
  unsigned long long old = at.load(std::memory_order_relaxed);
  while (value < old && !at.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}
// Correctly rounded arithmetic: what the host's does (no contraction into fused multiply-adds).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
