// Copies of tensors between the host and a device, for code generic over the device: what it
// computes on the host (initial weights, a batch of token ids, sinusoids) goes to the device,
// and what it reports (a loss, attention weights, a checkpoint) comes back.
#pragma once

#include <span>
#include <type_traits>

#include "tensor.hpp"

namespace attn {

/// A copy on Device of host elements (a plain copy when Device is the CPU).
template <class Device, class T, class S>
tensor<std::remove_const_t<T>, S, Device> to_device(const tensor_view<T, S, cpu>& host) {
  tensor<std::remove_const_t<T>, S, Device> result(host.extents(), uninitialized);
  memory<Device>::copy_from_host(result.data(), host.data(), result.bytes());
  return result;
}
template <class Device, class T, class S>
tensor<T, S, Device> to_device(const tensor<T, S, cpu>& host) {
  return to_device<Device>(host.view());
}

/// A host copy of a device's elements; waits for the work that writes them.
template <class T, class S, class Device>
tensor<std::remove_const_t<T>, S, cpu> to_host(const tensor_view<T, S, Device>& elements) {
  tensor<std::remove_const_t<T>, S, cpu> result(elements.extents(), uninitialized);
  memory<Device>::copy_to_host(result.data(), elements.data(), result.bytes());
  return result;
}
template <class T, class S, class Device>
tensor<T, S, cpu> to_host(const tensor<T, S, Device>& elements) {
  return to_host(elements.view());
}

/// Writes host values over a device's elements.
template <class Device, class T>
void copy_from_host(T* elements, std::span<const T> host) {
  memory<Device>::copy_from_host(elements, host.data(), host.size_bytes());
}

}  // namespace attn
