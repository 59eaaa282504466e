// Data-parallel workers agree through a communicator: sums over every process. One process
// by default; MPI for CPU processes (mpi.hpp); NCCL for GPUs uses the same interface.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <span>
#include <vector>

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
/// 25 MiB), and no second copy of all gradients. Consecutive small parameters share a staging
/// buffer; a parameter as large as a bucket is reduced in place.
template <class T, class Device = cpu>
class gradient_buckets {
 public:
  explicit gradient_buckets(grad::parameter_list<T, Device>& parameters, std::size_t bucket_bytes = std::size_t{25} << 20)
      : parameters_(&parameters) {
    const std::size_t capacity = std::max<std::size_t>(1, bucket_bytes / sizeof(T));
    std::size_t first = 0, elements = 0, largest = 0;
    const auto& refs = parameters.refs();
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const auto size = static_cast<std::size_t>(refs[i].size);
      if (size >= capacity && elements > 0) {  // a bucket of its own, reduced in place
        buckets_.push_back({first, i, elements});
        largest = std::max(largest, i > first + 1 ? elements : 0);
        first = i;
        elements = 0;
      }
      elements += size;
      if (elements >= capacity || i + 1 == refs.size()) {
        buckets_.push_back({first, i + 1, elements});
        if (i + 1 > first + 1) largest = std::max(largest, elements);
        first = i + 1;
        elements = 0;
      }
    }
    staging_.resize(largest);
  }

  /// Replaces every gradient by its sum over all processes.
  void all_reduce(communicator& comm) {
    if (comm.size() == 1) return;
    if constexpr (!std::same_as<Device, cpu>)
      throw std::logic_error("attn::train::gradient_buckets: the communicators sum host memory; gradients on a GPU "
                             "need NCCL");
    auto& refs = parameters_->refs();
    for (const bucket& b : buckets_) {
      if (b.last == b.first + 1) {
        comm.all_reduce_sum(std::span<T>(refs[b.first].grad, static_cast<std::size_t>(refs[b.first].size)));
        continue;
      }
      T* out = staging_.data();
      for (std::size_t i = b.first; i < b.last; ++i) out = std::copy_n(refs[i].grad, refs[i].size, out);
      comm.all_reduce_sum(std::span<T>(staging_.data(), b.elements));
      const T* in = staging_.data();
      for (std::size_t i = b.first; i < b.last; ++i) {
        std::copy_n(in, refs[i].size, refs[i].grad);
        in += refs[i].size;
      }
    }
  }

  std::size_t bucket_count() const noexcept { return buckets_.size(); }

 private:
  struct bucket {
    std::size_t first, last;  // parameters [first, last)
    std::size_t elements;
  };
  grad::parameter_list<T, Device>* parameters_;
  std::vector<bucket> buckets_;
  std::vector<T> staging_;
};

}  // namespace attn::train
