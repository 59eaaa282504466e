// The CPU emulator of the CUDA execution model (attn/cuda/emulator.hpp): the built-in variables,
// __syncthreads and shared memory, shuffles, the mistakes it reports instead of hanging, dynamic
// shared memory's rule, async copies (async_copy.cuh) landing when waited for (and early, when
// asked), fast_exp2's twin of ex2.approx.ftz, and mma.cuh's tensor-core helpers (whose PTX it replaces by twins written from the PTX
// ISA's fragment layouts) against plain products.
#include <attn/cuda/emulator.hpp>  // first: the kernels below are compiled for it

#include <attn/cuda/async_copy.cuh>
#include <attn/cuda/fast_exp2.cuh>
#include <attn/cuda/mma.cuh>
#include <attn/cuda/shared_memory.cuh>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#if defined(ATTN_EMULATOR_TSAN)
#include <cerrno>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "../../gpu/fast_exp2_cases.hpp"

namespace {

namespace emulator = attn::cuda_emulator;
namespace mma = attn::cuda_backend::mma;

__global__ void coordinates(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] = block * 1000 + thread;
}

/// Each block's place in the order the blocks ran, from a counter (thread 0 of each block).
__global__ void arrival(unsigned* counter, unsigned* order) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0) order[block] = atomicAdd(counter, 1u);
}

/// A block's sum by a tree in shared memory: wrong unless every __syncthreads holds.
__global__ void block_sums(const int* x, int* sums) {
  __shared__ int partial[256];
  partial[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  for (unsigned half = 128; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

/// Each thread's place in the order the block's threads took their turns before a barrier, and
/// after it.
__global__ void turns(unsigned* counter, unsigned* order) {
  order[threadIdx.x] = atomicAdd(counter, 1u);
  __syncthreads();
  order[blockDim.x + threadIdx.x] = atomicAdd(counter, 1u);
}

/// The same after thread `exiting` has exited: the turns after the barrier start from the first
/// (the last) thread still there, whether a thread's arrival or the exit completed the barrier.
__global__ void turns_after_an_exit(unsigned exiting, unsigned* counter, unsigned* order) {
  if (threadIdx.x == exiting) return;
  __syncthreads();
  order[threadIdx.x] = atomicAdd(counter, 1u);
}

/// Each lane's place in the order a warp's lanes took their turns after a shuffle.
__global__ void turns_after_a_shuffle(unsigned* counter, unsigned* order) {
  (void)__shfl_xor_sync(0xffffffffu, 1, 1);
  order[threadIdx.x] = atomicAdd(counter, 1u);
}

/// Thread t writes t + 1 into dynamic shared memory and reads thread t + step's (modulo the
/// block): with the barrier between, that thread's number whatever the order; without it, a race.
__global__ void neighbours(bool barrier, unsigned step, int* out) {
  int* const numbers = attn::cuda_backend::dynamic_shared_memory<int>();
  numbers[threadIdx.x] = int(threadIdx.x) + 1;
  if (barrier) __syncthreads();
  out[threadIdx.x] = numbers[(threadIdx.x + step) % blockDim.x];
}

/// Block 0 writes its dynamic shared memory; every block reads it back before writing.
__global__ void reads_before_writing(unsigned* out) {
  unsigned* const words = attn::cuda_backend::dynamic_shared_memory<unsigned>();
  out[blockIdx.x * blockDim.x + threadIdx.x] = words[threadIdx.x];
  if (blockIdx.x == 0) words[threadIdx.x] = 7;
}

__global__ void shuffles(int* out) {
  const int lane = int(threadIdx.x % 32);
  int sum = lane;
  for (int m = 1; m < 32; m *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);  // every lane: Σ lanes
  const int down = __shfl_down_sync(0xffffffffu, lane * 10, 3);                  // lane + 3's, or its own
  const int broadcast = __shfl_sync(0xffffffffu, lane * 100, 5);                 // lane 5's
  out[threadIdx.x * 3] = sum;
  out[threadIdx.x * 3 + 1] = down;
  out[threadIdx.x * 3 + 2] = broadcast;
}

/// Lane 0 waits at __syncthreads for its warp, which waits at a shuffle for lane 0.
__global__ void barrier_not_reached_by_all() {
  if (threadIdx.x == 0) __syncthreads();
  else (void)__shfl_xor_sync(0xffffffffu, 1, 1);
}

__global__ void lanes_at_different_collectives() {
  if (threadIdx.x % 2 == 0) (void)__shfl_xor_sync(0xffffffffu, 1, 1);
  else __syncwarp();
}

__global__ void collective_after_lanes_left() {
  if (threadIdx.x >= 16) return;
  (void)__shfl_xor_sync(0xffffffffu, 1, 1);
}

__global__ void throws_on_thread_7() {
  if (threadIdx.x == 7) throw std::runtime_error("thread 7");
  __syncthreads();
}

/// Every thread adds 1 to a count in shared memory, without an atomic: a race on a GPU (two
/// threads read the same count and one addition is lost), which the emulator's threads, each
/// running alone between synchronisations, never show in either order; ThreadSanitizer reports
/// it. With atomicAdd, no race.
__global__ void count_in_shared_memory(bool atomically, unsigned* out) {
  __shared__ unsigned count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  if (atomically) atomicAdd(&count, 1u);
  else count = count + 1;
  __syncthreads();
  if (threadIdx.x == 0) *out = count;
}

/// Lane 0 writes a number into shared memory and lane 1 reads it after a __syncwarp (which
/// orders the two) or after a shuffle (which exchanges values, not memory: a race).
__global__ void handed_over_in_a_warp(bool syncwarp, int* out) {
  __shared__ int number;
  if (threadIdx.x == 0) number = 42;
  if (syncwarp) __syncwarp();
  else (void)__shfl_sync(0xffffffffu, 0, 0);
  if (threadIdx.x == 1) *out = number;
}

/// ldmatrix's rows must be 16-byte aligned: one number past that is a misaligned address.
__global__ void misaligned_ldmatrix() {
  alignas(16) __shared__ std::uint16_t staged[16 * 24];
  mma::fragment_b left, right;
  mma::load_b_transposed(left, right, staged + 1, 24);
}

namespace async_copy = attn::cuda_backend::async_copy;

/// Two groups of one 16-byte copy each from `from`: what shared memory holds before any wait,
/// after wait<1> (the older group only) and after wait<0>, 16 bytes each, into out[0 … 95].
__global__ void copies_land_when_waited_for(const unsigned char* from, unsigned char* out) {
  alignas(16) __shared__ unsigned char first[16], second[16];
  async_copy::copy_16_bytes(first, from);
  async_copy::commit();
  async_copy::copy_16_bytes(second, from + 16);
  async_copy::commit();
  std::memcpy(out, first, 16);
  async_copy::wait<1>();
  std::memcpy(out + 16, first, 16), std::memcpy(out + 32, second, 16);
  async_copy::wait<0>();
  std::memcpy(out + 48, first, 16), std::memcpy(out + 64, second, 16);
  alignas(4) __shared__ unsigned char word[4];
  async_copy::copy_4_bytes(word, from + 32);
  async_copy::commit();
  async_copy::wait<0>();
  std::memcpy(out + 80, word, 4);
}

/// Copies 16 bytes from `from` into shared memory, then, before waiting, stages 16 bytes of its
/// own at the same place and reads them back after a barrier: a race with the copy, which may
/// land any time before the wait. out[0 … 15]: what the read saw.
__global__ void stages_over_a_copy_in_flight(const unsigned char* from, unsigned char* out) {
  alignas(16) __shared__ unsigned char staged[16];
  async_copy::copy_16_bytes(staged, from);
  async_copy::commit();
  std::memset(staged, 7, 16);
  __syncthreads();
  std::memcpy(out, staged, 16);
  async_copy::wait<0>();
}

__global__ void exits_with_copies_in_flight(const unsigned char* from) {
  alignas(16) __shared__ unsigned char staged[16];
  async_copy::copy_16_bytes(staged, from);
  async_copy::commit();
}

__global__ void misaligned_copy(const unsigned char* from) {
  alignas(16) __shared__ unsigned char staged[32];
  async_copy::copy_16_bytes(staged + 4, from);
  async_copy::commit();
  async_copy::wait<0>();
}

__global__ void fill_dynamic_shared(int bytes, int* ok) {
  auto* s = static_cast<unsigned char*>(emulator::dynamic_shared_memory());
  for (int i = int(threadIdx.x); i < bytes; i += int(blockDim.x)) s[i] = static_cast<unsigned char>(i);
  __syncthreads();
  if (threadIdx.x == 0) {
    *ok = 1;
    for (int i = 0; i < bytes; ++i) *ok &= s[i] == static_cast<unsigned char>(i);
  }
}

/// The 16-bit numbers of a row-major matrix as their bits.
template <class T>
std::vector<std::uint16_t> bits(const std::vector<float>& x) {
  std::vector<std::uint16_t> b;
  for (float v : x) b.push_back(T(v).bits);
  return b;
}

/// load_a_blocks (one ldmatrix) against load_a (four 32-bit loads): the A fragment of a 16 × 16
/// tile staged as the kernels stage keys.
__global__ void a_fragment_loads(const std::uint16_t* rows, std::uint32_t* blocks, std::uint32_t* single) {
  alignas(16) __shared__ std::uint16_t staged[16 * 24];
  for (int e = int(threadIdx.x); e < 256; e += 32) staged[e / 16 * 24 + e % 16] = rows[e];
  __syncwarp();
  mma::fragment_a by_blocks, by_pairs;
  mma::load_a_blocks(by_blocks, staged, 24);
  mma::load_a(by_pairs, staged, 24);
  const unsigned lane = threadIdx.x;
  for (int r = 0; r < 4; ++r) blocks[lane * 4 + r] = by_blocks[r], single[lane * 4 + r] = by_pairs[r];
}

/// C (16 × 8) = A (16 × 16) · B (16 × 8), B given as Bᵀ (its column n as row n, as keys hold
/// Kᵀ's), through load_a, load_b_from_rows and multiply_add; C stored row-major.
template <class T>
__global__ void product_from_rows(const std::uint16_t* a, const std::uint16_t* b_rows, float* c) {
  mma::fragment_a fa;
  mma::fragment_b fb;
  mma::accumulator acc = {};
  mma::load_a(fa, a, 16);
  mma::load_b_from_rows(fb, b_rows, 16);
  mma::multiply_add<T>(acc, fa, fb);
  const int g = mma::group(), t = mma::in_group();
  for (int i = 0; i < 4; ++i) c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

/// C (16 × 16) = A · B, B row-major as values are (load_b_transposed: two 16 × 8 tiles), and then
/// D = C rounded to T and fed back as an A fragment (to_a) times the identity: C's bits in T.
template <class T>
__global__ void product_transposed_and_back(const std::uint16_t* a, const std::uint16_t* b, const std::uint16_t* eye,
                                            float* c, float* d) {
  alignas(16) __shared__ std::uint16_t staged[16 * 24];  // B with 8 numbers of padding a row, as the kernels stage
  for (int e = int(threadIdx.x); e < 256; e += 32) staged[e / 16 * 24 + e % 16] = b[e];
  __syncwarp();
  mma::fragment_a fa;
  mma::fragment_b left, right;
  mma::accumulator c_left = {}, c_right = {};
  mma::load_a(fa, a, 16);
  mma::load_b_transposed(left, right, staged, 24);
  mma::multiply_add<T>(c_left, fa, left);
  mma::multiply_add<T>(c_right, fa, right);
  mma::fragment_a packed;
  mma::to_a<T>(packed, c_left, c_right);
  mma::fragment_b eye_left, eye_right;
  mma::load_b_from_rows(eye_left, eye, 16);
  mma::load_b_from_rows(eye_right, eye + 8 * 16, 16);
  mma::accumulator d_left = {}, d_right = {};
  mma::multiply_add<T>(d_left, packed, eye_left);
  mma::multiply_add<T>(d_right, packed, eye_right);
  const int g = mma::group(), t = mma::in_group();
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), column = 2 * t + i % 2;
    c[row * 16 + column] = c_left[i];
    c[row * 16 + 8 + column] = c_right[i];
    d[row * 16 + column] = d_left[i];
    d[row * 16 + 8 + column] = d_right[i];
  }
}

/// load_b_pair_from_rows (one ldmatrix) against two load_b_from_rows (four 32-bit loads): the
/// fragments of rows 0–7 and 8–15 of a 16-row tile staged as the kernels stage keys.
__global__ void paired_and_single_loads(const std::uint16_t* rows, std::uint32_t* paired, std::uint32_t* single) {
  alignas(16) __shared__ std::uint16_t staged[16 * 24];
  for (int e = int(threadIdx.x); e < 256; e += 32) staged[e / 16 * 24 + e % 16] = rows[e];
  __syncwarp();
  mma::fragment_b first, second, first_alone, second_alone;
  mma::load_b_pair_from_rows(first, second, staged, 24);
  mma::load_b_from_rows(first_alone, staged, 24);
  mma::load_b_from_rows(second_alone, staged + 8 * 24, 24);
  const unsigned lane = threadIdx.x;
  for (int r = 0; r < 2; ++r) {
    paired[lane * 4 + r] = first[r], paired[lane * 4 + 2 + r] = second[r];
    single[lane * 4 + r] = first_alone[r], single[lane * 4 + 2 + r] = second_alone[r];
  }
}

template <class T>
void check_products() {
  // Small integers and halves: every product and sum exact in float, so the order of the sums
  // cannot matter and C must equal the loop's bit for bit.
  std::vector<float> a(256), b(256);
  for (int e = 0; e < 256; ++e) a[std::size_t(e)] = float((e * 7) % 11 - 5) / 2, b[std::size_t(e)] = float((e * 5) % 13 - 6);
  const auto a_bits = bits<T>(a);

  // Bᵀ's rows: column n of a 16 × 8 B.
  std::vector<float> b_rows(128);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 16; ++k) b_rows[std::size_t(n * 16 + k)] = b[std::size_t(k * 16 + n)];
  const auto b_rows_bits = bits<T>(b_rows);
  std::vector<float> c(128, -1);
  emulator::launch(product_from_rows<T>, dim3(1), dim3(32), 0, a_bits.data(), b_rows_bits.data(), c.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float want = 0;
      for (int k = 0; k < 16; ++k) want += a[std::size_t(m * 16 + k)] * b[std::size_t(k * 16 + n)];
      CHECK(c[std::size_t(m * 8 + n)] == want);
    }

  std::vector<float> eye(256, 0);
  for (int i = 0; i < 16; ++i) eye[std::size_t(i * 16 + i)] = 1;
  const auto b_bits = bits<T>(b), eye_bits = bits<T>(eye);
  std::vector<float> full(256, -1), back(256, -1);
  emulator::launch(product_transposed_and_back<T>, dim3(1), dim3(32), 0, a_bits.data(), b_bits.data(),
                   eye_bits.data(), full.data(), back.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float want = 0;
      for (int k = 0; k < 16; ++k) want += a[std::size_t(m * 16 + k)] * b[std::size_t(k * 16 + n)];
      INFO("row ", m, " column ", n);
      CHECK(full[std::size_t(m * 16 + n)] == want);
      CHECK(back[std::size_t(m * 16 + n)] == float(T(want)));  // rounded to T once, by pack
    }
}

#if defined(ATTN_EMULATOR_TSAN)
/// The kernels the cases under ThreadSanitizer run in a child process, by name.
void run_for_a_race_check(const std::string& name) {
  const bool reverse = name.ends_with(" in reverse");
  const emulator::threads_in_reverse_while order_of_turns(reverse);
  const std::string kernel = reverse ? name.substr(0, name.size() - std::string(" in reverse").size()) : name;
  std::vector<int> numbers(64, 0);
  unsigned count = 0;
  if (kernel == "neighbours" || kernel == "neighbours with a barrier")
    emulator::launch(neighbours, dim3(2), dim3(64), 64 * sizeof(int), kernel != "neighbours", 1u, numbers.data());
  else if (kernel == "count" || kernel == "count by atomics")
    emulator::launch(count_in_shared_memory, dim3(1), dim3(64), 0, kernel != "count", &count);
  else if (kernel == "handed over by a shuffle" || kernel == "handed over by __syncwarp")
    emulator::launch(handed_over_in_a_warp, dim3(1), dim3(32), 0, kernel != "handed over by a shuffle", numbers.data());
  else
    FAIL("no kernel named ", name);
}

/// What ThreadSanitizer writes to the standard error of a child process (this program again,
/// the case "...for another case's child process" below) that runs the kernel named `name`: a
/// race is reported there, not in this process, which fails at its own.
/// ThreadSanitizer leaves a forked child that does not exec unchecked once the parent has
/// threads, which its fibers count as.
std::string race_reports(const std::string& name) {
  INFO("the child's kernel: ", name);
  int ends[2];
  REQUIRE(pipe(ends) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ends[0]);
    dup2(ends[1], STDERR_FILENO);
    if (FILE* quiet = std::freopen("/dev/null", "w", stdout); quiet == nullptr) std::_Exit(126);
    setenv("ATTN_EMULATOR_RACE_CHECK", name.c_str(), 1);
    execl("/proc/self/exe", "unit-emulated", "--test-case=*for another case's child process", nullptr);
    std::_Exit(127);
  }
  close(ends[1]);
  std::string reports;
  char buffer[4096];
  for (ssize_t got; (got = read(ends[0], buffer, sizeof buffer)) != 0;) {
    if (got > 0) reports.append(buffer, std::size_t(got));
    else if (errno != EINTR) break;
  }
  close(ends[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  // A child that ran (with or without a report) and exited: 0, or ThreadSanitizer's 66.
  CHECK(WIFEXITED(status));
  CHECK((WEXITSTATUS(status) == 0) == reports.empty());
  return reports;
}
#endif

}  // namespace

TEST_CASE("emulator: fragments through ldmatrix equal fragments through 32-bit loads (a pair of B's, an A)") {
  std::vector<std::uint16_t> rows(256);
  for (std::size_t e = 0; e < rows.size(); ++e) rows[e] = static_cast<std::uint16_t>(e * 37 + 11);  // all different
  const auto same_fragments = [&](auto kernel) {
    std::vector<std::uint32_t> by_ldmatrix(128, 0), by_loads(128, 1);
    emulator::launch(kernel, dim3(1), dim3(32), 0, rows.data(), by_ldmatrix.data(), by_loads.data());
    return by_ldmatrix == by_loads;
  };
  CHECK(same_fragments(paired_and_single_loads));
  CHECK(same_fragments(a_fragment_loads));
}

TEST_CASE("emulator: every block and thread runs once, with its coordinates") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  std::vector<unsigned> out(12 * 24, 0xdeadbeef);
  emulator::launch(coordinates, grid, block, 0, out.data());
  for (unsigned b = 0; b < 12; ++b)
    for (unsigned t = 0; t < 24; ++t) CHECK(out[b * 24 + t] == b * 1000 + t);
}

TEST_CASE("emulator: blocks run first to last, or last to first when asked") {
  const dim3 grid(3, 2, 2);
  for (const bool reverse : {false, true}) {
    emulator::blocks_in_reverse() = reverse;
    unsigned counter = 0;
    std::vector<unsigned> order(12, 99);
    emulator::launch(arrival, grid, dim3(32), 0, &counter, order.data());
    emulator::blocks_in_reverse() = false;
    for (unsigned b = 0; b < 12; ++b) CHECK(order[b] == (reverse ? 11 - b : b));
    std::vector<unsigned> out(12 * 24, 0xdeadbeef);  // every block and thread still once
    emulator::blocks_in_reverse() = reverse;
    emulator::launch(coordinates, grid, dim3(4, 3, 2), 0, out.data());
    emulator::blocks_in_reverse() = false;
    for (unsigned b = 0; b < 12; ++b)
      for (unsigned t = 0; t < 24; ++t) CHECK(out[b * 24 + t] == b * 1000 + t);
  }
}

TEST_CASE("emulator: a block's threads take their turns first to last, or last to first when asked") {
  for (const bool reverse : {false, true}) {
    unsigned counter = 0;
    std::vector<unsigned> order(2 * 64, 999);
    {
      const emulator::threads_in_reverse_while order_of_turns(reverse);
      emulator::launch(turns, dim3(1), dim3(64), 0, &counter, order.data());
    }
    for (unsigned t = 0; t < 64; ++t) {
      CHECK(order[t] == (reverse ? 63 - t : t));
      CHECK(order[64 + t] == 64 + (reverse ? 63 - t : t));
    }
    // The first thread to run exits (the barrier completes at an arrival), or the last does
    // (the exit completes it): the turns start from the first thread left, in either order.
    for (const bool first_exits : {true, false}) {
      const unsigned exiting = first_exits != reverse ? 0 : 63;
      counter = 0;
      std::vector<unsigned> after_exit(64, 999);
      {
        const emulator::threads_in_reverse_while order_of_turns(reverse);
        emulator::launch(turns_after_an_exit, dim3(1), dim3(64), 0, exiting, &counter, after_exit.data());
      }
      INFO("thread ", exiting, " exits");
      CHECK(after_exit[exiting] == 999);
      unsigned place = 0;  // the turns of the 63 left, first to last or last to first
      for (unsigned k = 0; k < 64; ++k) {
        const unsigned t = reverse ? 63 - k : k;
        if (t != exiting) CHECK(after_exit[t] == place++);
      }
    }
    counter = 0;
    std::vector<unsigned> after_shuffle(64, 999);
    {
      const emulator::threads_in_reverse_while order_of_turns(reverse);
      emulator::launch(turns_after_a_shuffle, dim3(1), dim3(64), 0, &counter, after_shuffle.data());
    }
    // Each warp's lanes in order after its shuffle (warp 0 first, in order; warp 1, reversed).
    for (unsigned t = 0; t < 64; ++t) {
      const unsigned warp = t / 32, lane = t % 32;
      const unsigned warp_place = reverse ? 1 - warp : warp, lane_place = reverse ? 31 - lane : lane;
      CHECK(after_shuffle[t] == warp_place * 32 + lane_place);
    }
  }
}

TEST_CASE("emulator: a race over shared memory gives different results in the two orders of the threads") {
  const auto run = [](bool barrier, unsigned step, bool reverse) {
    const emulator::threads_in_reverse_while order_of_turns(reverse);
    std::vector<int> out(64, 0);
    emulator::launch(neighbours, dim3(1), dim3(64), 64 * sizeof(int), barrier, step, out.data());
    return out;
  };
  for (const unsigned step : {1u, 63u}) {  // the next thread's number, or the one before's
    INFO("step ", step);
    std::vector<int> theirs(64);
    for (unsigned t = 0; t < 64; ++t) theirs[t] = int((t + step) % 64) + 1;
    CHECK(run(true, step, false) == theirs);  // a barrier orders the write and the read
    CHECK(run(true, step, true) == theirs);
    // Without it, each order hides the race the other shows: reading the next thread's number
    // gets the pattern (0xffffffff) in order, reading the one before's gets it in reverse.
    // Under ThreadSanitizer the race is reported, in a child process (below).
#if !defined(ATTN_EMULATOR_TSAN)
    const auto in_order = run(false, step, false), reversed = run(false, step, true);
    CHECK(in_order != reversed);
    CHECK(in_order[1] == (step == 1 ? -1 : 1));
    CHECK(reversed[1] == (step == 1 ? 3 : -1));
#endif
  }
}

#if !defined(ATTN_EMULATOR_TSAN)
TEST_CASE("emulator: races that neither order of the threads shows (ThreadSanitizer's build reports them)") {
  for (const bool reverse : {false, true}) {
    INFO("threads in reverse: ", reverse);
    const emulator::threads_in_reverse_while order_of_turns(reverse);
    // Each thread adds alone between the two barriers, so no addition is lost, atomic or not.
    unsigned count = 0;
    emulator::launch(count_in_shared_memory, dim3(1), dim3(64), 0, false, &count);
    CHECK(count == 64);
    // Every lane reaches the shuffle before any goes on, so lane 0's write comes first.
    int out = 0;
    emulator::launch(handed_over_in_a_warp, dim3(1), dim3(32), 0, false, &out);
    CHECK(out == 42);
  }
}
#endif

#if defined(ATTN_EMULATOR_TSAN)
TEST_CASE("emulator under ThreadSanitizer: one kernel run for another case's child process") {
  if (const char* name = std::getenv("ATTN_EMULATOR_RACE_CHECK")) run_for_a_race_check(name);  // else nothing to do
}

TEST_CASE("emulator under ThreadSanitizer: a race over shared memory is reported in either order, its absence not") {
  for (const std::string order : {"", " in reverse"}) {
    const std::string racing = race_reports("neighbours" + order);
    INFO(racing);
    CHECK(racing.find("ThreadSanitizer: data race") != std::string::npos);
    CHECK(racing.find("neighbours") != std::string::npos);  // the kernel's frame
    CHECK(race_reports("neighbours with a barrier" + order) == "");
  }
}

TEST_CASE("emulator under ThreadSanitizer: a race that neither order shows (a count without an atomic)") {
  // The emulator's threads each add in turn, so the count comes out right in either order;
  // ThreadSanitizer reports the threads' unordered accesses all the same.
  const std::string racing = race_reports("count");
  INFO(racing);
  CHECK(racing.find("ThreadSanitizer: data race") != std::string::npos);
  CHECK(racing.find("count_in_shared_memory") != std::string::npos);
  CHECK(race_reports("count by atomics") == "");
}

TEST_CASE("emulator under ThreadSanitizer: __syncwarp orders a warp's memory accesses, a shuffle does not") {
  const std::string racing = race_reports("handed over by a shuffle");
  INFO(racing);
  CHECK(racing.find("ThreadSanitizer: data race") != std::string::npos);
  CHECK(racing.find("handed_over_in_a_warp") != std::string::npos);
  CHECK(race_reports("handed over by __syncwarp") == "");
}
#endif

TEST_CASE("emulator: each block finds its dynamic shared memory filled with the pattern, not an earlier block's numbers") {
  std::vector<unsigned> out(3 * 32, 0);
  emulator::launch(reads_before_writing, dim3(3), dim3(32), 32 * sizeof(unsigned), out.data());
  for (unsigned x : out) CHECK(x == 0xffffffffu);
}

TEST_CASE("emulator: __syncthreads and shared memory") {
  std::vector<int> x(4 * 256), sums(4, 0);
  std::iota(x.begin(), x.end(), -300);
  emulator::launch(block_sums, dim3(4), dim3(256), 0, x.data(), sums.data());
  for (int b = 0; b < 4; ++b) CHECK(sums[std::size_t(b)] == std::accumulate(x.begin() + b * 256, x.begin() + (b + 1) * 256, 0));
}

TEST_CASE("emulator: shuffles") {
  std::vector<int> out(64 * 3, -1);
  emulator::launch(shuffles, dim3(1), dim3(64), 0, out.data());
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    CHECK(out[std::size_t(t * 3)] == 31 * 32 / 2);
    CHECK(out[std::size_t(t * 3 + 1)] == (lane + 3 < 32 ? (lane + 3) * 10 : lane * 10));
    CHECK(out[std::size_t(t * 3 + 2)] == 500);
  }
}

TEST_CASE("emulator: a kernel's mistakes throw instead of hanging") {
  CHECK_THROWS_WITH_AS(emulator::launch(barrier_not_reached_by_all, dim3(2), dim3(64), 0),
                       doctest::Contains("cannot go on"), emulator::kernel_error);
  CHECK_THROWS_WITH_AS(emulator::launch(lanes_at_different_collectives, dim3(1), dim3(32), 0),
                       doctest::Contains("__syncwarp"), emulator::kernel_error);
  CHECK_THROWS_WITH_AS(emulator::launch(collective_after_lanes_left, dim3(1), dim3(32), 0),
                       doctest::Contains("__shfl_xor_sync"), emulator::kernel_error);
  CHECK_THROWS_WITH_AS(emulator::launch(throws_on_thread_7, dim3(1), dim3(32), 0), "thread 7", std::runtime_error);
  CHECK_THROWS_AS(emulator::launch(coordinates, dim3(1), dim3(2048), 0, static_cast<unsigned*>(nullptr)),
                  emulator::kernel_error);
  // A GPU's grid holds at most 65535 blocks along y and z, and a block 64 threads along z.
  CHECK_THROWS_WITH_AS(emulator::launch(coordinates, dim3(1, 65536), dim3(32), 0, static_cast<unsigned*>(nullptr)),
                       doctest::Contains("65535"), emulator::kernel_error);
  CHECK_THROWS_AS(emulator::launch(coordinates, dim3(1, 1, 65536), dim3(32), 0, static_cast<unsigned*>(nullptr)),
                  emulator::kernel_error);
  CHECK_THROWS_AS(emulator::launch(coordinates, dim3(1), dim3(1, 1, 128), 0, static_cast<unsigned*>(nullptr)),
                  emulator::kernel_error);
  CHECK_THROWS_WITH_AS(emulator::launch(misaligned_ldmatrix, dim3(1), dim3(32), 0), doctest::Contains("16-byte"),
                       emulator::kernel_error);
  // The emulator is usable again after each.
  std::vector<int> x(256, 1), sums(1, 0);
  emulator::launch(block_sums, dim3(1), dim3(256), 0, x.data(), sums.data());
  CHECK(sums[0] == 256);
}

TEST_CASE("emulator: async copies land when a wait covers their group, and a thread must wait for them") {
  alignas(16) unsigned char from[48];
  for (int i = 0; i < 48; ++i) from[i] = static_cast<unsigned char>(i + 1);
  std::vector<unsigned char> out(96, 0);
  emulator::launch(copies_land_when_waited_for, dim3(1), dim3(1), 0, from, out.data());
  const auto bytes = [&](int at) { return std::vector<unsigned char>(out.begin() + at, out.begin() + at + 16); };
  const std::vector<unsigned char> garbage(16, 0xff), first(from, from + 16), second(from + 16, from + 32);
  CHECK(bytes(0) == garbage);  // read before any wait
  CHECK(bytes(16) == first);   // wait<1>: the older group
  CHECK(bytes(32) == garbage);
  CHECK(bytes(48) == first);   // wait<0>: both
  CHECK(bytes(64) == second);
  CHECK(std::vector<unsigned char>(out.begin() + 80, out.begin() + 84) ==
        std::vector<unsigned char>(from + 32, from + 36));
  CHECK_THROWS_WITH_AS(emulator::launch(exits_with_copies_in_flight, dim3(1), dim3(32), 0, from),
                       doctest::Contains("not waited for"), emulator::kernel_error);
  CHECK_THROWS_WITH_AS(emulator::launch(misaligned_copy, dim3(1), dim3(1), 0, from), doctest::Contains("aligned"),
                       emulator::kernel_error);
}

TEST_CASE("emulator: async copies land early, at the first barrier after their issue, when asked") {
  alignas(16) unsigned char from[48];  // copies_land_when_waited_for reads all 48
  for (int i = 0; i < 48; ++i) from[i] = static_cast<unsigned char>(i + 1);
  std::vector<unsigned char> out(16, 0);
  const std::vector<unsigned char> staged(16, 7), copied(from, from + 16);
  emulator::launch(stages_over_a_copy_in_flight, dim3(1), dim3(1), 0, from, out.data());
  CHECK(out == staged);  // landing at the wait: the race hides
  struct early_landing {
    early_landing() { emulator::async_copies_land_early() = true; }
    ~early_landing() { emulator::async_copies_land_early() = false; }
  } early;
  emulator::launch(stages_over_a_copy_in_flight, dim3(1), dim3(1), 0, from, out.data());
  CHECK(out == copied);  // landing at the barrier: the staged bytes are overwritten
  std::vector<unsigned char> waited(96, 0);
  emulator::launch(copies_land_when_waited_for, dim3(1), dim3(1), 0, from, waited.data());
  CHECK(std::vector<unsigned char>(waited.begin() + 48, waited.begin() + 64) == copied);  // a wait still lands them
}

TEST_CASE("emulator: dynamic shared memory above 48 KiB only when the kernel allows it") {
  int ok = 0;
  emulator::runtime::launch(fill_dynamic_shared, dim3(1), dim3(128), 1000, 1000, &ok);
  CHECK(ok == 1);
  const int bytes = 80 * 1024;
  CHECK_THROWS_WITH_AS(emulator::runtime::launch(fill_dynamic_shared, dim3(1), dim3(128), bytes, bytes, &ok),
                       doctest::Contains("cudaFuncSetAttribute"), emulator::kernel_error);
  CHECK_THROWS_AS(emulator::runtime::allow_shared_memory(fill_dynamic_shared, 300 * 1024), emulator::kernel_error);
  emulator::runtime::allow_shared_memory(fill_dynamic_shared, bytes);
  ok = 0;
  emulator::runtime::launch(fill_dynamic_shared, dim3(2), dim3(128), bytes, bytes, &ok);
  CHECK(ok == 1);
}

TEST_CASE("mma.cuh on the emulator: fragments, ldmatrix's transpose and to_a against plain products") {
  SUBCASE("bfloat16") { check_products<attn::bfloat16>(); }
  SUBCASE("float16") { check_products<attn::float16>(); }
}

TEST_CASE("emulator: fast_exp2 gives 2^x within 2 ulp, 0 below the normal range, as the GPU's test asks") {
  int wrong = 0;
  for (const float x : fast_exp2_cases::inputs()) {
    const std::string mistake = fast_exp2_cases::mistake(x, attn::cuda_backend::fast_exp2(x));
    if (!mistake.empty() && wrong++ < 5) FAIL_CHECK(mistake);
  }
  CHECK(wrong == 0);
  CHECK(attn::cuda_backend::fast_exp2(-127.f) == 0.f);  // 2^-127, subnormal: flushed
  CHECK(attn::cuda_backend::fast_exp2(-126.f) == std::ldexp(1.f, -126));
}
