// Runs one Eigen assignment `dst = expression` as a single fused pass, split across threads.
#pragma once

#include <algorithm>

#include "eigen.hpp"
#include "threads.hpp"

namespace attn::cpu_backend {

// The evaluator's own count (unpacket_traits of its packet type, as Eigen defines it): naming
// the packet type as a template argument drops its alignment attributes, which GCC warns about,
// and GCC 12 ignores a pragma silencing that warning in a precompiled header (tests/unit/pch).
template <class Evaluator>
constexpr index_t packet_size() {
  return Evaluator::PacketSize;
}

/// Evaluates an Eigen tensor expression into `dst` with one evaluator shared by the threads:
/// expressions Eigen prefers to tile (broadcasts, shuffles) as a range of its L1-sized blocks
/// per thread, as Eigen's own thread-pool executor does; the others as a range of linear
/// indices per thread, in packets. No slicing node, so no per-packet index arithmetic.
/// `reads_per_element`: input elements read per output element (a reduction's extent), so
/// that the fork-join threshold counts work, not outputs.
template <class Dst, class Src>
void run_assign(Dst& dst, const Src& source, index_t reads_per_element = 1) {
  using assign_type = const Eigen::TensorAssignOp<Dst, const Src>;
  using evaluator_type = Eigen::TensorEvaluator<assign_type, Eigen::DefaultDevice>;
  constexpr int rank = Dst::NumDimensions;
  const Eigen::DefaultDevice device;
  assign_type assignment(dst, source);
  evaluator_type evaluator(assignment, device);
  if (evaluator.evalSubExprsIfNeeded(nullptr)) {
    constexpr bool tiled =
        rank > 0 && Eigen::internal::IsTileable<Eigen::DefaultDevice, assign_type>::value ==
                        Eigen::internal::TiledEvaluation::On;
    if constexpr (tiled) {
      using mapper = Eigen::internal::TensorBlockMapper<rank, evaluator_type::Layout, Eigen::Index>;
      using descriptor = Eigen::internal::TensorBlockDescriptor<rank, Eigen::Index>;
      const mapper blocks(typename descriptor::Dimensions(evaluator.dimensions()),
                          evaluator.getResourceRequirements());
      const index_t per_block = std::max<index_t>(1, blocks.blockTotalSize());
      parallel_for(blocks.blockCount(), 1, std::max<index_t>(1, (index_t{1} << 15) / per_block),
                   [&](index_t begin, index_t end) {
                     Eigen::internal::TensorBlockScratchAllocator<Eigen::DefaultDevice> scratch(device);
                     for (index_t b = begin; b < end; ++b) {
                       auto block = blocks.blockDescriptor(b);
                       evaluator.evalBlock(block, scratch);
                       scratch.reset();
                     }
                   });
    } else {
      constexpr bool vectorised = evaluator_type::PacketAccess;
      constexpr index_t packet = vectorised ? packet_size<evaluator_type>() : 1;
      // Below ~32k elements a fork-join costs more than it saves.
      const index_t min_per_thread =
          std::max<index_t>(4 * packet, (index_t{1} << 15) / std::max<index_t>(1, reads_per_element));
      parallel_for(dst.size(), 4 * packet, min_per_thread, [&](index_t begin, index_t end) {
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
  }
  evaluator.cleanup();
}

}  // namespace attn::cpu_backend
