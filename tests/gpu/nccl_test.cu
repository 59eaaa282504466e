// The NCCL communicator (cuda/attn/cuda/nccl.cuh) with one process: its sums of device and host
// memory give the values back (a sum over one process), started sums finish at wait_all() in
// attn's stream order, gradient buckets over it leave gradients as they were, and NCCL ids
// survive their text form while malformed ones are refused.
#include "gpu_test.cuh"

#include <attn/cuda/nccl.cuh>
#include <attn/train/communicator.hpp>

#include <string>
#include <vector>

namespace {

using namespace gpu_test;
using attn::extents;
using attn::shape;
using elements = attn::dim<"elements">;

void one_rank() {
  const std::string text = attn::cuda_backend::make_nccl_id();
  const ncclUniqueId id = attn::cuda_backend::parse_nccl_id(text);
  expect(text.size() == 2 * sizeof id.internal, "an NCCL id as text", std::to_string(text.size()) + " hex digits");
  std::string back;
  for (const char byte : id.internal) {
    static constexpr char digits[] = "0123456789abcdef";
    back += digits[(static_cast<unsigned char>(byte) >> 4) & 0xF];
    back += digits[static_cast<unsigned char>(byte) & 0xF];
  }
  expect(back == text, "an NCCL id survives its text form");
  bool refused = false;
  try {
    (void)attn::cuda_backend::parse_nccl_id("zz" + text.substr(2));
  } catch (const std::invalid_argument&) {
    refused = true;
  }
  expect(refused, "a malformed NCCL id is refused");

  attn::cuda_backend::nccl_communicator comm(0, 1, id);
  expect(comm.rank() == 0 && comm.size() == 1 && comm.sums_device_memory(), "rank 0 of 1, summing device memory");

  const auto host = random_host<float>(extents<shape<elements>>(100'003));
  auto device = upload(host);
  comm.all_reduce_sum(std::span<float>(device.data(), std::size_t(device.size())));
  compare("sum of device memory over one process", download(device), reference(host.extents(), [&](auto i) {
            return at(host, i);
          }), 0.0);

  std::vector<double> numbers = {1.5, -2.25, 1e300};
  comm.all_reduce_sum(std::span<double>(numbers));
  expect(numbers == std::vector<double>{1.5, -2.25, 1e300}, "sum of host memory over one process");

  // A started sum reads what attn's stream wrote before it, and attn's stream waits for it.
  const auto original = upload(host);
  attn::tensor<float, shape<elements>, attn::cuda> doubled(original.extents());
  doubled = original * 2.0f;
  comm.start_all_reduce_sum(std::span<float>(doubled.data(), std::size_t(doubled.size())));
  comm.wait_all();
  compare("a started sum, after wait_all", download(doubled), reference(host.extents(), [&](auto i) {
            return 2 * at(host, i);
          }), 0.0);
  comm.barrier();
  settle("barrier");
  expect(true, "barrier of one process returns");

  // For the record (scripts/gpu.sh keeps this test's lines): how long a 25 MiB bucket's sum takes
  // over one process, NCCL's fixed cost at one rank.
  attn::tensor<float, shape<elements>, attn::cuda> bucket(extents<shape<elements>>(25 << 18));
  const std::span<float> values(bucket.data(), std::size_t(bucket.size()));
  comm.all_reduce_sum(values);  // warm-up
  cudaEvent_t begin = nullptr, end = nullptr;
  cuda_ok(cudaEventCreate(&begin), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&end), "cudaEventCreate");
  cuda_ok(cudaEventRecord(begin, attn::cuda_backend::stream()), "cudaEventRecord");
  for (int i = 0; i < 20; ++i) comm.start_all_reduce_sum(values);
  comm.wait_all();
  cuda_ok(cudaEventRecord(end, attn::cuda_backend::stream()), "cudaEventRecord");
  cuda_ok(cudaEventSynchronize(end), "cudaEventSynchronize");
  float milliseconds = 0;
  cuda_ok(cudaEventElapsedTime(&milliseconds, begin, end), "cudaEventElapsedTime");
  const double each = milliseconds / 20;
  expect(each > 0, "a 25 MiB bucket summed over one process",
         std::to_string(each) + " ms each, " + std::to_string(25.0 * 1.048576 / each) + " GB/s");
  (void)cudaEventDestroy(begin);
  (void)cudaEventDestroy(end);
}

}  // namespace

int main() {
  if (const int skip = skip_without_device(); skip != 0) return skip;
  try {
    one_rank();
  } catch (const std::exception& error) {
    fail("nccl tests", std::string("threw: ") + error.what());
  }
  return finish();
}
