// Data-parallel workers agree through a communicator: sums over every process. One process
// by default; MPI for CPU processes (mpi.hpp); NCCL for GPUs uses the same interface.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "../core/tensor.hpp"
#include "../grad/parameter.hpp"

namespace attn::train {

class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Element-wise sum over all processes, in place; every process receives the result.
  virtual void all_reduce_sum(std::span<float> values) = 0;
  virtual void all_reduce_sum(std::span<double> values) = 0;
  /// Starts the same sum and returns; the values may be neither read nor written until
  /// wait_all() has returned. The default sums at once.
  virtual void start_all_reduce_sum(std::span<float> values) { all_reduce_sum(values); }
  virtual void start_all_reduce_sum(std::span<double> values) { all_reduce_sum(values); }
  /// Returns when every sum started has finished.
  virtual void wait_all() {}
  /// Whether the sums take device memory (NCCL: a GPU's gradients) rather than host memory.
  virtual bool sums_device_memory() const { return false; }
  /// Returns when every process has called it.
  virtual void barrier() = 0;
  /// Ends every process at once, with `status`: what an error on one of them must do, since
  /// the others may be waiting for it in a collective.
  [[noreturn]] virtual void abort(int status) noexcept = 0;
};

/// The default: one process, whose sums are its own values.
class single_process final : public communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<double>) override {}
  void barrier() override {}
  [[noreturn]] void abort(int status) noexcept override { std::exit(status); }
};

/// Sums the gradients of a parameter list over all processes in buckets of about
/// `bucket_bytes`: a few large messages instead of one per parameter (PyTorch's DDP uses
/// 25 MiB). Consecutive small parameters share a staging buffer; a parameter as large as a
/// bucket is reduced in place. The sums may overlap the backward pass: a bucket's starts as
/// soon as the tape says its last parameter's gradient is complete (grad::tape::replay), while
/// the backward pass computes the others' (PyTorch DDP's overlap; on GPUs, NCCL's stream).
template <class T, class Device = cpu>
class gradient_buckets {
 public:
  explicit gradient_buckets(grad::parameter_list<T, Device>& parameters, std::size_t bucket_bytes = std::size_t{25} << 20)
      : parameters_(&parameters) {
    const std::size_t capacity = std::max<std::size_t>(1, bucket_bytes / sizeof(T));
    std::size_t first = 0, elements = 0, staged = 0;
    const auto& refs = parameters.refs();
    auto close = [&](std::size_t last) {
      const bool alone = last == first + 1;
      buckets_.push_back({first, last, elements, alone ? 0 : staged});
      if (!alone) staged += elements;
      first = last;
      elements = 0;
    };
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const auto size = static_cast<std::size_t>(refs[i].size);
      if (size >= capacity && elements > 0) close(i);  // a bucket of its own, reduced in place
      elements += size;
      if (elements >= capacity || i + 1 == refs.size()) close(i + 1);
    }
    staging_.emplace(extents<shape<staged_elements>>(static_cast<index_t>(staged)));
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (std::size_t i = buckets_[b].first; i < buckets_[b].last; ++i) bucket_of_[refs[i].identity] = b;
    waiting_.resize(buckets_.size());
  }

  /// Replaces every gradient by its sum over all processes, after the backward pass.
  void all_reduce(communicator& comm) {
    begin(comm);
    finish();
  }

  /// Summing while the backward pass runs: begin(comm); then complete(identity) for each
  /// parameter whose gradient is final (what grad::backward's third argument is called with);
  /// then finish(), which starts the buckets not started yet (parameters the tape did not note)
  /// and waits until every sum is done. The gradients are then the sums, as after all_reduce.
  void begin(communicator& comm) {
    comm_ = comm.size() > 1 ? &comm : nullptr;
    if (comm_ && !std::same_as<Device, cpu> && !comm.sums_device_memory())
      throw std::logic_error("attn::train::gradient_buckets: this communicator sums host memory; gradients on a GPU "
                             "need NCCL");
    for (std::size_t b = 0; b < buckets_.size(); ++b) waiting_[b] = buckets_[b].last - buckets_[b].first;
    started_ = 0;
  }
  void complete(const void* identity) {
    if (comm_ == nullptr) return;
    const auto found = bucket_of_.find(identity);
    if (found == bucket_of_.end()) return;  // a variable that is not one of these parameters
    if (--waiting_[found->second] == 0) {
      start(found->second);
      ++started_;
    }
  }
  void finish() {
    if (comm_ == nullptr) return;
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      if (waiting_[b] > 0) {
        waiting_[b] = 0;
        start(b);
      }
    comm_->wait_all();
    auto& refs = parameters_->refs();
    for (const bucket& b : buckets_) {  // the staged sums back into their gradients
      if (b.last == b.first + 1) continue;
      const T* in = staging_->data() + b.offset;
      for (std::size_t i = b.first; i < b.last; ++i) {
        memory<Device>::copy(refs[i].grad, in, sizeof(T) * static_cast<std::size_t>(refs[i].size));
        in += refs[i].size;
      }
    }
    comm_ = nullptr;
  }

  std::size_t bucket_count() const noexcept { return buckets_.size(); }
  /// How many buckets began summing before finish(): the overlap the last step had.
  std::size_t started_early() const noexcept { return started_; }

 private:
  using staged_elements = dim<"staged_elements">;
  struct bucket {
    std::size_t first, last;  // parameters [first, last)
    std::size_t elements;
    std::size_t offset;  // in the staging buffer, for a bucket of several parameters
  };

  void start(std::size_t b) {
    const bucket& k = buckets_[b];
    auto& refs = parameters_->refs();
    if (k.last == k.first + 1) {
      comm_->start_all_reduce_sum(std::span<T>(refs[k.first].grad, static_cast<std::size_t>(refs[k.first].size)));
    } else {
      T* out = staging_->data() + k.offset;
      for (std::size_t i = k.first; i < k.last; ++i) {
        memory<Device>::copy(out, refs[i].grad, sizeof(T) * static_cast<std::size_t>(refs[i].size));
        out += refs[i].size;
      }
      comm_->start_all_reduce_sum(std::span<T>(staging_->data() + k.offset, k.elements));
    }
  }

  grad::parameter_list<T, Device>* parameters_;
  std::vector<bucket> buckets_;
  std::optional<tensor<T, shape<staged_elements>, Device>> staging_;  // the buckets of several parameters, one after another
  std::unordered_map<const void*, std::size_t> bucket_of_;
  std::vector<std::size_t> waiting_;  // parameters of each bucket not complete yet
  communicator* comm_ = nullptr;     // between begin() and finish(), when summing
  std::size_t started_ = 0;
};

}  // namespace attn::train
