// Parameters: named variables that always want a gradient, and a flat list of them for
// optimizers and checkpoints.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "../core/primitives.hpp"
#include "variable.hpp"

namespace attn::grad {

/// A trainable tensor: a variable that requires a gradient, whose gradient is allocated up
/// front and summed over backward passes (gradient accumulation) until zero_grad().
template <element T, shape_type S, device Device = cpu>
class parameter : public variable<T, S, Device> {
 public:
  using base = variable<T, S, Device>;

  explicit parameter(const attn::extents<S>& sizes) : base(typename base::tensor_type(sizes), true) {
    this->zero_grad();
  }
  parameter()
    requires(S::is_static)
      : parameter(attn::extents<S>{}) {}
};

/// One parameter seen as flat arrays (in the memory of the list's device): what optimizers,
/// gradient all-reduce and checkpoints need.
template <element T>
struct parameter_ref {
  std::string name;   // "encoder.layer.0.self_attention.query.weight"
  std::string shape;  // "[d_model=512, heads_d_k=512]"
  std::vector<index_t> sizes;
  T* value;
  T* grad;
  index_t size;
  const void* identity = nullptr;  // the parameter's variable::identity(), as a tape's notes name it
};

template <element T, shape_type S, device Device>
parameter_ref<T> make_ref(std::string name, parameter<T, S, Device>& p) {
  const auto& sizes = p.extents().sizes();
  return {std::move(name),      p.extents().to_string(), std::vector<index_t>(sizes.begin(), sizes.end()),
          p.value().data(),     p.grad().data(),         p.value().size(),
          p.identity()};
}

/// The parameters of a module on Device, in a fixed order, with dotted names.
template <element T, device Device = cpu>
class parameter_list {
 public:
  explicit parameter_list(std::string prefix = "") : prefix_(std::move(prefix)) {}

  using device_type = Device;

  template <shape_type S>
  void add(const std::string& name, parameter<T, S, Device>& p) {
    refs_.push_back(make_ref(prefix_ + name, p));
  }

  /// Adds the parameters of a sub-module under "prefix.name.".
  template <class Module>
  void add_module(const std::string& name, Module& m) {
    parameter_list inner(prefix_ + name + ".");
    m.collect(inner);
    for (auto& r : inner.refs_) refs_.push_back(std::move(r));
  }

  const std::vector<parameter_ref<T>>& refs() const noexcept { return refs_; }
  std::vector<parameter_ref<T>>& refs() noexcept { return refs_; }
  auto begin() { return refs_.begin(); }
  auto end() { return refs_.end(); }
  std::size_t size() const noexcept { return refs_.size(); }

  /// Number of scalars in all the parameters.
  index_t count() const {
    index_t n = 0;
    for (const auto& r : refs_) n += r.size;
    return n;
  }

  /// Every gradient set to zero, in one launch where the device allows it.
  void zero_grad() {
    std::vector<flat_array<T>> gradients;
    gradients.reserve(refs_.size());
    for (const auto& r : refs_) gradients.push_back({r.grad, r.size});
    primitives<Device>::fill(std::span<const flat_array<T>>(gradients), T{0});
  }

 private:
  std::string prefix_;
  std::vector<parameter_ref<T>> refs_;
};

}  // namespace attn::grad
