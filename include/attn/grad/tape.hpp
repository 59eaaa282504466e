// The tape: the backward steps of one forward pass, replayed in reverse by backward().
#pragma once

#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace attn::grad {

/// One recorded backward step: its closure on the heap, run and destroyed through two plain
/// function pointers. Moved, never copied: std::function, which it replaces, must be able to copy
/// its closure, so each kind of step had its copy constructor (the handles it captures), a
/// manager and its type information compiled, 4 % of a model's code (docs/model.md,
/// "Compile time"). A closure may hold what cannot be copied.
class backward_step {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, backward_step>)
  explicit backward_step(F&& f)
      : closure_(new std::decay_t<F>(std::forward<F>(f))),
        run_(&run<std::decay_t<F>>),
        destroy_(&destroy<std::decay_t<F>>) {}
  backward_step(backward_step&& other) noexcept
      : closure_(std::exchange(other.closure_, nullptr)), run_(other.run_), destroy_(other.destroy_) {}
  backward_step& operator=(backward_step&& other) noexcept {
    if (this != &other) {
      reset();
      closure_ = std::exchange(other.closure_, nullptr);
      run_ = other.run_;
      destroy_ = other.destroy_;
    }
    return *this;
  }
  ~backward_step() { reset(); }

  void operator()() {
    if (closure_ == nullptr) throw std::logic_error("attn::grad: a backward step ran after it was run or cleared");
    run_(closure_);
  }
  void reset() noexcept {
    if (closure_ != nullptr) destroy_(std::exchange(closure_, nullptr));
  }

 private:
  template <class F>
  static void run(void* closure) { (*static_cast<F*>(closure))(); }
  template <class F>
  static void destroy(void* closure) noexcept { delete static_cast<F*>(closure); }

  void* closure_;
  void (*run_)(void*);
  void (*destroy_)(void*) noexcept;
};

/// Records, for each differentiable operation of a forward pass, the step that passes its
/// result's gradient on to its operands. Operations record only when given a tape; without
/// one (inference) they keep nothing, so activations are freed as soon as they are unused.
///
/// It also knows when a variable's gradient is complete: a variable noted when the forward pass
/// first reads it (grad::cast notes every parameter a module reads) receives gradient only from
/// the steps recorded after that point, so once the backward pass has replayed them, its
/// gradient is final. Data-parallel training sums such gradients over processes while the
/// backward pass goes on (train::gradient_buckets).
class tape {
 public:
  tape() = default;
  tape(const tape&) = delete;
  tape& operator=(const tape&) = delete;

  template <class Step>
  void record(Step&& step) {
    steps_.emplace_back(std::forward<Step>(step));
  }

  /// Notes that the variable with this identity (variable::identity()) is read from here on.
  /// Only its first note counts.
  void note_read(const void* identity) {
    if (noted_.insert(identity).second) notes_.push_back({steps_.size(), identity});
  }

  /// Runs the recorded steps, last first, each forgotten with the activations it held as soon as
  /// it has run.
  /// The caller seeds the gradient of the result first (see attn::grad::backward).
  void replay() {
    replay([](const void*) {});
  }

  /// replay(), calling complete(identity) for each noted variable as soon as every step that
  /// can add to its gradient has run.
  template <class Complete>
  void replay(Complete&& complete) {
    std::size_t pending = notes_.size();  // notes_[0, pending) not yet reported; their positions ascend
    auto report_from = [&](std::size_t position) {
      while (pending > 0 && notes_[pending - 1].position >= position) complete(notes_[--pending].identity);
    };
    report_from(steps_.size());  // noted, never read by a recorded step
    for (std::size_t step = steps_.size(); step-- > 0;) {
      steps_[step]();
      // Its result's gradient and the values it kept are needed no more: freed now, the
      // backward pass holds at once only the gradients still on their way to the inputs.
      steps_[step].reset();
      report_from(step);
    }
    clear();
  }

  void clear() {
    steps_.clear();
    notes_.clear();
    noted_.clear();
  }
  std::size_t size() const noexcept { return steps_.size(); }

 private:
  struct note {
    std::size_t position;  // steps recorded before the first read
    const void* identity;
  };
  std::vector<backward_step> steps_;
  std::vector<note> notes_;
  std::unordered_set<const void*> noted_;
};

}  // namespace attn::grad
