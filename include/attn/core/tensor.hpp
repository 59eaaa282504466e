// Tensors: owning, aligned, row-major storage of a shape on a device, and non-owning views of it.
#pragma once

#include <cassert>
#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>

#include "device.hpp"
#include "extents.hpp"
#include "float16.hpp"
#include "shape.hpp"

namespace attn {

template <class T>
concept element = std::is_arithmetic_v<T> || is_float16_storage<T>;

/// Tag for a tensor whose elements are about to be overwritten: skips the zero fill.
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

/// A non-owning, dense, row-major window onto elements of type T with shape S on Device.
/// Views are the leaves of expressions; assigning an expression to a view writes through it.
template <class T, shape_type S, device Device = cpu>
class tensor_view {
 public:
  using value_type = std::remove_const_t<T>;
  using element_type = T;
  using shape_type = S;
  using device_type = Device;
  static constexpr std::size_t rank = S::rank;

  tensor_view(T* data, const attn::extents<S>& extents) : data_(data), extents_(extents) {}

  /// A view of mutable elements is also a view of const ones. A template, so that a const view
  /// declares no conversion to its own type (nvcc warns about one even when constrained away).
  template <class U>
    requires(std::same_as<U, value_type> && !std::is_const_v<T>)
  operator tensor_view<const U, S, Device>() const {
    return {data_, extents_};
  }

  T* data() const noexcept { return data_; }
  const attn::extents<S>& extents() const noexcept { return extents_; }
  index_t size() const noexcept { return extents_.size(); }
  template <dimension D>
  index_t extent() const noexcept {
    return extents_.template extent<D>();
  }

  /// Element access on the host, one index per dimension in shape order.
  template <std::integral... I>
    requires(sizeof...(I) == rank && std::same_as<Device, cpu>)
  T& operator()(I... index) const {
    return data_[offset(index...)];
  }

  /// Writes the value of an expression (or another view) into the viewed elements.
  template <class E>
    requires(!std::is_const_v<T> && requires { typename E::shape_type; })
  const tensor_view& operator=(const E& expression) const {
    executor<Device>::assign(*this, expression);
    return *this;
  }
  const tensor_view& operator=(const tensor_view& other) const
    requires(!std::is_const_v<T>)
  {
    executor<Device>::assign(*this, tensor_view<const value_type, S, Device>(other));
    return *this;
  }
  tensor_view(const tensor_view&) = default;

 private:
  template <class... I>
  index_t offset(I... index) const {
    index_t flat = 0;
    std::size_t d = 0;
    ((assert(index >= 0 && index < extents_[d]), flat = flat * extents_[d++] + index), ...);
    return flat;
  }

  T* data_;
  attn::extents<S> extents_;
};

/// An owning tensor: zero-initialised, aligned storage for the elements of shape S on Device.
template <element T, shape_type S, device Device = cpu>
class tensor {
 public:
  using value_type = T;
  using element_type = T;
  using shape_type = S;
  using device_type = Device;
  using view_type = tensor_view<T, S, Device>;
  using const_view_type = tensor_view<const T, S, Device>;
  static constexpr std::size_t rank = S::rank;

  explicit tensor(const attn::extents<S>& extents) : extents_(extents), data_(allocate(extents)) {}

  /// Storage whose contents are unspecified until written (where the device allows it).
  tensor(const attn::extents<S>& extents, uninitialized_t)
      : extents_(extents), data_(allocate(extents, /*zeroed=*/false)) {}

  /// Static shapes need no sizes.
  tensor()
    requires(S::is_static)
      : tensor(attn::extents<S>{}) {}

  /// One size for each dynamic dimension, in shape order.
  template <std::integral... Sizes>
    requires(S::rank_dynamic > 0 && sizeof...(Sizes) == S::rank_dynamic)
  explicit tensor(Sizes... dynamic_sizes) : tensor(attn::extents<S>(dynamic_sizes...)) {}

  /// Allocates and evaluates an expression of the same shape.
  template <class E>
    requires(requires { typename E::shape_type; } && std::same_as<typename E::shape_type, S> &&
             !std::same_as<E, tensor>)
  explicit tensor(const E& expression) : tensor(expression.extents(), uninitialized) {
    view() = expression;
  }

  tensor(const tensor& other) : tensor(other.extents_, uninitialized) {
    memory<Device>::copy(data(), other.data(), bytes());
  }
  tensor(tensor&&) noexcept = default;
  tensor& operator=(tensor&&) noexcept = default;
  tensor& operator=(const tensor& other) {
    if (this != &other) view() = other.view();
    return *this;
  }

  /// Evaluates an expression into this tensor; extents must match.
  template <class E>
    requires requires { typename E::shape_type; }
  tensor& operator=(const E& expression) {
    view() = expression;
    return *this;
  }

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  const attn::extents<S>& extents() const noexcept { return extents_; }
  index_t size() const noexcept { return extents_.size(); }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(size()) * sizeof(T); }
  template <dimension D>
  index_t extent() const noexcept {
    return extents_.template extent<D>();
  }

  view_type view() noexcept { return {data(), extents_}; }
  const_view_type view() const noexcept { return {data(), extents_}; }
  operator view_type() noexcept { return view(); }
  operator const_view_type() const noexcept { return view(); }

  template <std::integral... I>
    requires(sizeof...(I) == rank && std::same_as<Device, cpu>)
  T& operator()(I... index) {
    return view()(index...);
  }
  template <std::integral... I>
    requires(sizeof...(I) == rank && std::same_as<Device, cpu>)
  const T& operator()(I... index) const {
    return view()(index...);
  }

 private:
  struct deleter {
    void operator()(T* p) const noexcept { memory<Device>::deallocate(p); }
  };
  static T* allocate(const attn::extents<S>& extents, bool zeroed = true) {
    const auto bytes = static_cast<std::size_t>(extents.size()) * sizeof(T);
    if constexpr (requires { memory<Device>::allocate_uninitialized(bytes); }) {
      if (!zeroed) return static_cast<T*>(memory<Device>::allocate_uninitialized(bytes));
    }
    return static_cast<T*>(memory<Device>::allocate(bytes));
  }

  attn::extents<S> extents_;
  std::unique_ptr<T[], deleter> data_;
};

/// The same elements under the dimension names of To, whose dimensions have From's extents in
/// From's order (each static with the same extent, or dynamic). A library operation that views its
/// operands under names of its own is compiled once for every naming of its shapes with the same
/// extents: an encoder's and a decoder's layers, whose lengths have different names, share its
/// code (docs/model.md, "Compile time").
template <shape_type To, class T, class From, class Device>
tensor_view<T, To, Device> view_as(const tensor_view<T, From, Device>& v) {
  return {v.data(), attn::extents<To>::renamed(v.extents())};
}

template <class T>
inline constexpr bool is_tensor_view_v = false;
template <class T, class S, class D>
inline constexpr bool is_tensor_view_v<tensor_view<T, S, D>> = true;

template <class T>
inline constexpr bool is_tensor_v = false;
template <class T, class S, class D>
inline constexpr bool is_tensor_v<tensor<T, S, D>> = true;

}  // namespace attn
