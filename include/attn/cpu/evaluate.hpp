// Runs one Eigen assignment `dst = expression` as a single fused pass, split across threads.
#pragma once

#include "eigen.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

// Packet types carry alignment attributes that GCC warns about dropping in template arguments.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
template <class Evaluator>
constexpr index_t packet_size() {
  return Eigen::internal::unpacket_traits<typename Evaluator::PacketReturnType>::size;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Evaluates an Eigen tensor expression into `dst`: every element is computed once, in
/// packets where the expression allows, in contiguous pieces of the output per thread.
template <class Dst, class Src>
void run_assign(Dst& dst, const Src& source) {
  using assign_type = const Eigen::TensorAssignOp<Dst, const Src>;
  using evaluator_type = Eigen::TensorEvaluator<assign_type, Eigen::DefaultDevice>;
  const Eigen::DefaultDevice device;
  assign_type assignment(dst, source);
  evaluator_type evaluator(assignment, device);
  // False when the source wrote straight into dst's memory (reductions can).
  if (evaluator.evalSubExprsIfNeeded(nullptr)) {
    const index_t size = dst.size();
    constexpr bool vectorised = evaluator_type::PacketAccess;
    constexpr index_t packet = vectorised ? packet_size<evaluator_type>() : 1;
    // Below ~32k elements a fork-join costs more than it saves.
    parallel_for(size, 4 * packet, index_t{1} << 15, [&](index_t begin, index_t end) {
      evaluator_type local = evaluator;
      index_t i = begin;
      if constexpr (vectorised) {
        for (; i + 4 * packet <= end; i += 4 * packet) {
          local.evalPacket(i);
          local.evalPacket(i + packet);
          local.evalPacket(i + 2 * packet);
          local.evalPacket(i + 3 * packet);
        }
        for (; i + packet <= end; i += packet) local.evalPacket(i);
      }
      for (; i < end; ++i) local.evalScalar(i);
    });
  }
  evaluator.cleanup();
}

}  // namespace attn::cpu_backend
