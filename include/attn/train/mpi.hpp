// The MPI communicator: data-parallel training over CPU processes started by mpirun, the
// same code path the GPU communicator takes. Include it only where MPI is available.
#pragma once

// The C API only: Open MPI's deprecated C++ bindings do not compile warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace attn::train {

class mpi_error : public std::runtime_error {
 public:
  mpi_error(const char* call, int code) : std::runtime_error(std::string("attn::train::mpi: ") + call + " failed: " + text(code)) {}

 private:
  static std::string text(int code) {
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    return MPI_Error_string(code, message, &length) == MPI_SUCCESS ? std::string(message, length)
                                                                  : "error " + std::to_string(code);
  }
};

/// MPI_COMM_WORLD. Initialises MPI unless the program already did, and finalises what it
/// initialised. Errors become exceptions instead of MPI's default abort.
class mpi_communicator final : public communicator {
 public:
  mpi_communicator(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // OpenMP threads exist, but only the main thread calls MPI.
      int provided = 0;
      check("MPI_Init_thread", MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
      owns_ = true;
      if (provided < MPI_THREAD_FUNNELED) throw std::runtime_error("attn::train::mpi: MPI_THREAD_FUNNELED is not supported");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check("MPI_Comm_rank", MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    check("MPI_Comm_size", MPI_Comm_size(MPI_COMM_WORLD, &size_));
  }
  ~mpi_communicator() override {
    if (owns_) MPI_Finalize();
  }
  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> values) override { reduce(values.data(), values.size(), MPI_FLOAT); }
  void all_reduce_sum(std::span<double> values) override { reduce(values.data(), values.size(), MPI_DOUBLE); }
  /// MPI_Iallreduce: the sum goes on while the caller computes (as far as the MPI library
  /// progresses it in the background; Open MPI mostly does inside MPI calls).
  void start_all_reduce_sum(std::span<float> values) override { start(values.data(), values.size(), MPI_FLOAT); }
  void start_all_reduce_sum(std::span<double> values) override { start(values.data(), values.size(), MPI_DOUBLE); }
  void wait_all() override {
    if (pending_.empty()) return;
    const int count = static_cast<int>(pending_.size());
    const int code = MPI_Waitall(count, pending_.data(), MPI_STATUSES_IGNORE);
    pending_.clear();
    check("MPI_Waitall", code);
  }
  void barrier() override { check("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD)); }
  /// Copies root's bytes to every process (MPI_Bcast): how a GPU job's processes learn the
  /// NCCL id that rank 0 made.
  void broadcast(std::span<char> bytes, int root) {
    check("MPI_Bcast", MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, root, MPI_COMM_WORLD));
  }
  /// This process's rank among those on its machine (which GPU of the machine is its).
  int local_rank() const {
    MPI_Comm local = MPI_COMM_NULL;
    check("MPI_Comm_split_type", MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    int rank = 0;
    const int code = MPI_Comm_rank(local, &rank);
    MPI_Comm_free(&local);
    check("MPI_Comm_rank", code);
    return rank;
  }

  [[noreturn]] void abort(int status) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::abort();  // MPI_Abort does not return; should it, end this process anyway
  }

 private:
  static void check(const char* call, int code) {
    if (code != MPI_SUCCESS) throw mpi_error(call, code);
  }
  template <class T>
  static void reduce(T* data, std::size_t count, MPI_Datatype type) {
    while (count > 0) {  // MPI counts are int
      const int chunk = static_cast<int>(std::min<std::size_t>(count, INT_MAX));
      check("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, data, chunk, type, MPI_SUM, MPI_COMM_WORLD));
      data += chunk;
      count -= static_cast<std::size_t>(chunk);
    }
  }

  template <class T>
  void start(T* data, std::size_t count, MPI_Datatype type) {
    while (count > 0) {
      const int chunk = static_cast<int>(std::min<std::size_t>(count, INT_MAX));
      pending_.emplace_back();
      check("MPI_Iallreduce", MPI_Iallreduce(MPI_IN_PLACE, data, chunk, type, MPI_SUM, MPI_COMM_WORLD, &pending_.back()));
      data += chunk;
      count -= static_cast<std::size_t>(chunk);
    }
  }

  int rank_ = 0, size_ = 1;
  bool owns_ = false;
  std::vector<MPI_Request> pending_;  // started sums
};

}  // namespace attn::train
