// attn-train: trains a translation Transformer on parallel text with the recipe of the paper
// (§5): shared BPE vocabulary, token-budget batches, label smoothing, Adam with equation (3),
// dropout, checkpoints, validation, and data-parallel processes under mpirun.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(ATTN_TRAIN_MPI)
#include <attn/train/mpi.hpp>
#endif

#include <attn/text/subword.hpp>
#include <attn/train/data.hpp>
#include <attn/train/launch.hpp>
#if defined(ATTN_EXAMPLES_NCCL)
#include <sys/prctl.h>

#include <attn/cuda/nccl.cuh>
#endif

#include "../common/numbers.hpp"
#include "../common/stop_signals.hpp"
#include "checkpoints.hpp"
#include "options.hpp"
#include "run.hpp"
#include "session.hpp"

namespace attn::trainer {

namespace {

/// A process started by mpirun, srun or another PMI launcher.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

/// A process of its own, not one of an MPI or --gpus job: it says what a signal does as it comes
/// (each process of a job would say it again), and ends by the signal that stopped it.
bool alone() { return !launched_by_mpi() && std::getenv("ATTN_RANK") == nullptr; }

/// What a stop signal's notice starts with: on a terminal, the line the ^C was echoed on ends.
std::string notice_start() { return isatty(STDERR_FILENO) == 1 ? "\n" : ""; }

/// The process's communicators: `bootstrap` (MPI, when it only hands out the NCCL id) outlives
/// `sums`, the one training uses.
struct communicators {
  std::unique_ptr<train::communicator> bootstrap, sums;
};

#if defined(ATTN_EXAMPLES_NCCL)
/// A variable the launcher set in the environment.
std::string from_environment(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) throw std::runtime_error(std::string(name) + " is not set (attn-train --gpus sets it)");
  return text;
}
int number_from_environment(const char* name) {
  const std::string text = from_environment(name);
  const std::optional<int> value = examples::whole_number(text);
  if (!value) throw std::runtime_error(std::string(name) + " is not a number: '" + text + "'");
  return *value;
}

/// Joins the job's NCCL communicator on GPU `device` (which becomes current).
std::unique_ptr<train::communicator> join_nccl(int rank, int size, int device, const ncclUniqueId& id) {
  if (const std::string missing = examples::use_cuda_device(device); !missing.empty())
    throw std::runtime_error("rank " + std::to_string(rank) + ": cuda:" + std::to_string(device) + ": " + missing);
  return std::make_unique<cuda_backend::nccl_communicator>(rank, size, id);
}
#endif

/// One process (default); an MPI process (mpirun, srun); or, with --device cuda, one of the
/// processes of a GPU job: started by attn-train --gpus (ATTN_RANK in its environment), or by
/// an MPI launcher, MPI then only handing out the NCCL id. Each takes GPU device.index + its
/// rank on the machine.
communicators make_communicator([[maybe_unused]] const options& o, [[maybe_unused]] int* argc,
                                [[maybe_unused]] char*** argv) {
  communicators c;
  if (std::getenv("ATTN_RANK") != nullptr) {  // a worker of attn-train --gpus
#if defined(ATTN_EXAMPLES_NCCL)
    // Ends with the supervisor: a worker must not train on alone (Linux).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != number_from_environment("ATTN_SUPERVISOR_PID")) throw std::runtime_error("the supervisor has ended");
    const int rank = number_from_environment("ATTN_RANK"), size = number_from_environment("ATTN_WORLD_SIZE");
    c.sums = join_nccl(rank, size, o.device.index + rank, cuda_backend::parse_nccl_id(from_environment("ATTN_NCCL_ID")));
    return c;
#else
    throw std::runtime_error("ATTN_RANK is set, but this attn-train was built without NCCL");
#endif
  }
#if defined(ATTN_TRAIN_MPI)
  if (launched_by_mpi()) {
    auto mpi = std::make_unique<train::mpi_communicator>(argc, argv);
    if (!o.device.cuda) {
      c.sums = std::move(mpi);
      return c;
    }
#if defined(ATTN_EXAMPLES_NCCL)
    std::string id(2 * sizeof(ncclUniqueId::internal), '0');
    if (mpi->rank() == 0) id = cuda_backend::make_nccl_id();
    mpi->broadcast(std::span<char>(id.data(), id.size()), 0);
    c.sums = join_nccl(mpi->rank(), mpi->size(), o.device.index + mpi->local_rank(), cuda_backend::parse_nccl_id(id));
    c.bootstrap = std::move(mpi);
    return c;
#else
    throw std::runtime_error("--device cuda under an MPI launcher needs NCCL, which this attn-train was built without");
#endif
  }
#else
  if (launched_by_mpi())  // each process would think itself alone and write the same files
    throw std::runtime_error("started by an MPI launcher, but built without MPI (install libopenmpi-dev and rebuild)");
#endif
  c.sums = std::make_unique<train::single_process>();
  return c;
}

/// attn-train --gpus N: starts N copies of this program, one a GPU, and supervises them
/// (include/attn/train/launch.hpp). Returns the job's exit status.
int launch(const options& o, int argc, char** argv) {
#if defined(ATTN_EXAMPLES_NCCL)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (o.device.index + o.gpus > count) {
    std::fprintf(stderr, "attn-train: --gpus %d from cuda:%d needs GPUs %d to %d; this machine has %d\n", o.gpus,
                 o.device.index, o.device.index, o.device.index + o.gpus - 1, count);
    return 2;
  }
  const std::string id = cuda_backend::make_nccl_id();
  const std::string program = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<train::worker> workers;
  for (int rank = 0; rank < o.gpus; ++rank) {
    train::worker w;
    w.arguments.push_back(program);
    for (int i = 1; i < argc; ++i) w.arguments.emplace_back(argv[i]);
    w.environment = {"ATTN_RANK=" + std::to_string(rank), "ATTN_WORLD_SIZE=" + std::to_string(o.gpus),
                     "ATTN_NCCL_ID=" + id, "ATTN_SUPERVISOR_PID=" + std::to_string(::getpid())};
    w.name = "rank " + std::to_string(rank) + " (GPU " + std::to_string(o.device.index + rank) + ")";
    workers.push_back(std::move(w));
  }
  std::fprintf(stderr, "attn-train: %d process(es), one on each of GPUs %d to %d\n", o.gpus, o.device.index,
               o.device.index + o.gpus - 1);
  const train::job_outcome outcome = train::run_workers(workers, std::chrono::seconds(10));
  if (!outcome.message.empty()) std::fprintf(stderr, "attn-train: %s\n", outcome.message.c_str());
  if (outcome.stop_signal != 0) examples::end_by(outcome.stop_signal);  // the workers saved and stopped
  return outcome.status;
#else
  (void)argc;
  (void)argv;
  std::fprintf(stderr, "attn-train: --gpus %d needs attn-train built with CUDA and NCCL (this one has %s)\n", o.gpus,
               examples::cuda_compiled() ? "CUDA without NCCL" : "neither");
  return 2;
#endif
}

/// The vocabulary: OUT/vocab.model when resuming, --vocab when given (copied beside the
/// checkpoints), otherwise trained on the training text by the first process.
text::subword_model prepare_vocabulary(const options& o, train::communicator& comm) {
  const auto saved = o.out / "vocab.model";
  if (o.resume) {
    if (!o.vocabulary.empty() && comm.rank() == 0)
      std::fprintf(stderr, "attn-train: --resume uses the run's own %s; --vocab is ignored\n", saved.c_str());
    if (!std::filesystem::exists(saved))
      throw std::runtime_error("--resume: '" + saved.string() + "' is missing; it was written beside the checkpoints");
    return text::subword_model::load(saved);
  }
  if (comm.rank() == 0) {
    if (!o.vocabulary.empty()) {
      const auto given = text::subword_model::load(o.vocabulary);  // refuse a bad file before copying it
      std::error_code same;
      if (!std::filesystem::equivalent(o.vocabulary, saved, same))
        std::filesystem::copy_file(o.vocabulary, saved, std::filesystem::copy_options::overwrite_existing);
    } else {
      std::fprintf(stderr, "training a %d-subword BPE vocabulary on %s and %s\n", o.vocabulary_size,
                   o.source.c_str(), o.target.c_str());
      text::subword_model::train({o.source, o.target}, o.out / "vocab", o.vocabulary_size,
                                 o.threads > 0 ? o.threads : 1);
    }
  }
  comm.barrier();
  return text::subword_model::load(saved);
}

/// Encodes checked parallel text, reporting what was skipped.
std::vector<train::example> encode(const train::parallel_text& text, const session& s, const std::string& where,
                                   const char* what) {
  train::filter_report report;
  auto examples = train::encode_pairs(text, s.vocabulary, std::size_t(s.opts.max_length), report);
  if (s.leader()) std::fprintf(stderr, "%s: %s\n", what, report.summary().c_str());
  if (examples.empty()) throw std::runtime_error(std::string(what) + ": no usable sentence pairs in " + where);
  return examples;
}

/// The compiled widths asked for, and the run-time hyperparameters, from preset + overrides.
const compiled_model& choose_model(const options& o, nn::hyperparameters& hyper) {
  const compiled_model* preset = nullptr;
  for (const auto& m : compiled_models())
    if (o.preset == m.name) preset = &m;
  if (preset == nullptr)
    throw std::runtime_error("--config " + o.preset + " is not compiled into this attn-train (meson option example_models)");
  model_widths w = preset->widths;
  if (o.d_model) w.d_model = o.d_model;
  if (o.d_ff) w.d_ff = o.d_ff;
  if (o.heads) w.heads = o.heads;
  if (o.d_k) w.d_k = o.d_k;
  if (o.d_v) w.d_v = o.d_v;
  const compiled_model* chosen = w == preset->widths ? preset : nullptr;
  for (const auto& m : compiled_models())
    if (chosen == nullptr && m.widths == w) chosen = &m;
  if (chosen == nullptr) {
    std::string known;
    for (const auto& m : compiled_models()) known += std::string("\n  ") + m.name + " " + m.widths.to_string();
    throw std::runtime_error("no model is compiled for " + w.to_string() + "; attn-train has:" + known +
                             "\n(meson options: example_models for the presets, trainer_table3=true for the widths of Table 3, rows A-C)");
  }
  hyper = preset_hyperparameters(o.preset);
  if (o.layers) hyper.layers = o.layers;
  if (o.dropout >= 0) hyper.dropout = o.dropout;
  hyper.attention_dropout = o.attention_dropout;
  if (!o.positions.empty())
    hyper.positions = o.positions == "learned" ? nn::positional::learned
                      : o.positions == "none"  ? nn::positional::none
                                               : nn::positional::sinusoidal;
  hyper.attention = o.attention;
  if (hyper.positions == nn::positional::learned && o.max_length + 1 > nn::default_max_positions)
    throw std::runtime_error("--positions learned holds " + std::to_string(nn::default_max_positions) +
                             " positions; lower --max-length to fit");
  return *chosen;
}

/// Holds OUT/.lock while the run lives, so that two runs cannot write one directory.
class directory_lock {
 public:
  explicit directory_lock(const std::filesystem::path& directory) {
    const auto path = directory / ".lock";
    descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (descriptor_ < 0) throw std::runtime_error("cannot open '" + path.string() + "': " + std::strerror(errno));
    if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0)
      throw std::runtime_error("'" + directory.string() + "' is in use by another attn-train (" + path.string() +
                               " is locked)");
  }
  ~directory_lock() { ::close(descriptor_); }
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;

 private:
  int descriptor_ = -1;
};

/// The exit status of a run stopped by `signal` before it trained: nothing to save.
int stopped_before_training(const train::communicator& comm, int signal) {
  if (comm.rank() == 0) std::fprintf(stderr, "attn-train: stopped by a signal before training\n");
  return 128 + signal;
}

int train(const options& o, train::communicator& comm) {
  std::filesystem::create_directories(o.out);
  std::optional<directory_lock> lock;
  if (comm.rank() == 0) lock.emplace(o.out);
  const checkpoint_directory checkpoints(o.out, o.keep);
  if (o.resume && !checkpoints.newest())  // before anything else: a mistyped --out says so
    throw std::runtime_error("--resume: no checkpoint-*.safetensors in '" + o.out.string() + "'");
  if (!o.resume && checkpoints.newest())
    throw std::runtime_error("'" + o.out.string() + "' already holds checkpoints: pass --resume to continue that run, "
                             "or choose another --out");

  nn::hyperparameters hyper;
  const compiled_model& model = choose_model(o, hyper);
  if (o.device.cuda && model.train_cuda[0] == nullptr)
    throw std::runtime_error(std::string("the widths of ") + model.name + " are not compiled for CUDA (the presets are)");
  const train_function chosen = (o.device.cuda ? model.train_cuda : model.train)[activation_index(o.precision)];
  if (chosen == nullptr)
    throw std::runtime_error(std::string("--precision ") + to_string(o.precision) + " is not compiled into this attn-train for " +
                             model.name + (o.device.cuda ? " on a GPU" : "") +
                             " (meson options example_precisions and example_gpu_precisions; Table 3's widths train in "
                             "fp32)");
  if (o.device.cuda && comm.size() > 1 && !comm.sums_device_memory())
    throw std::runtime_error("--device cuda with several processes needs NCCL's communicator");
  // Until training starts a stop has nothing to keep (nothing trained yet to save, and a run
  // started again prepares the data anew), so it ends the run at once, not after the time that
  // the vocabulary and the encoding take, which grows with the corpus.
  // A signal before it (while the processes met, MPI's or NCCL's) stops the run here.
  std::optional<examples::nothing_to_keep> preparing(
      std::in_place,
      alone() ? notice_start() + "attn-train: stopped while preparing the vocabulary and the data: nothing to save\n"
              : std::string());
  if (const int signal = stop_signal().load(); signal != 0) return stopped_before_training(comm, signal);
  // Line counts and UTF-8 are checked before minutes go into a vocabulary.
  const auto train_text = train::read_parallel(o.source, o.target);
  std::optional<train::parallel_text> valid_text;
  if (!o.valid_source.empty()) valid_text = train::read_parallel(o.valid_source, o.valid_target);

  session s{o, &comm, prepare_vocabulary(o, comm), model.name, hyper};
  s.train_examples = encode(train_text, s, "'" + o.source.string() + "' and '" + o.target.string() + "'", "training data");
  s.train_batches = train::plan_batches(s.train_examples, std::size_t(o.batch_tokens), o.seed);
  if (valid_text) {
    s.valid_examples = encode(*valid_text, s, "'" + o.valid_source.string() + "' and '" + o.valid_target.string() + "'",
                              "validation data");
    s.valid_batches = train::plan_batches(s.valid_examples, std::size_t(o.batch_tokens), o.seed);
  }
  preparing.reset();
  // A signal whose handler ran as `preparing` was made, before it could see it.
  if (const int signal = stop_signal().load(); signal != 0) return stopped_before_training(comm, signal);
  return chosen(s);
}

}  // namespace
}  // namespace attn::trainer

int main(int argc, char** argv) {
  using namespace attn::trainer;
  const options o = parse(argc, argv);
  if (o.gpus > 0 && std::getenv("ATTN_RANK") == nullptr) {  // the supervisor of a GPU job
    try {
      return launch(o, argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attn-train: %s\n", e.what());
      return 1;
    }
  }
  // Before MPI starts its threads, so that they block the stop signals too, and only the signal
  // thread takes them (stop_signals.hpp). The loop saves and stops (run.hpp). A process alone says
  // so as the signal comes; each process of a job would say it again.
  attn::examples::take_stop_signals(
      alone() ? notice_start() + "attn-train: stopping after this step, saving a checkpoint (again to stop at once)\n"
              : std::string());
  communicators communicators;
  try {
    communicators = make_communicator(o, &argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-train: %s\n", e.what());
    return 1;
  }
  std::unique_ptr<attn::train::communicator>& comm = communicators.sums;
#if defined(_OPENMP)
  if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
  std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit makes a write fail (and be reported), not kill us
  try {
    // Stopped by a signal: one process ends by it, as a shell expects; the processes of a job
    // (MPI's, --gpus's) exit with 128 + it, for their launcher to read.
    const int status = train(o, *comm);
    return alone() ? attn::examples::finish(status) : status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-train: %s\n", e.what());
    // The other processes may be waiting in a collective for this one: end them all.
    if (comm->size() > 1) comm->abort(1);
    return 1;
  }
}
