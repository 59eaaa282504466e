// Variables: a value that operations read, and the gradient that backward() accumulates for it.
#pragma once

#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <utility>

#include "../core/tensor.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/expression.hpp"
#include "tape.hpp"

namespace attn::grad {

/// A tensor in a differentiable computation. Copies share one value and one gradient, so an
/// operation's backward step, holding a copy, sees what later steps accumulate.
///
/// The value and the gradient are held apart: a backward step that only passes gradient through
/// (a sum, dropout, a head split) keeps `without_value()` handles to its operands and result,
/// so a value lives only as long as the forward pass or some step that reads it still needs it.
template <element T, shape_type S, device Device = cpu>
class variable {
 public:
  using value_type = T;
  using shape_type = S;
  using device_type = Device;
  using tensor_type = tensor<T, S, Device>;

  /// Takes the value; gradients flow to it only when `requires_grad`.
  explicit variable(tensor_type value, bool requires_grad = false)
      : value_(std::make_shared<tensor_type>(std::move(value))),
        state_(std::make_shared<state>(value_->extents(), requires_grad)) {}

  /// Evaluates an expression into a new value.
  template <expression E>
    requires std::same_as<typename E::shape_type, S>
  explicit variable(const E& value, bool requires_grad = false)
      : variable(tensor_type(value), requires_grad) {}

  const tensor_type& value() const { return checked_value(); }
  tensor_type& value() { return checked_value(); }
  const attn::extents<S>& extents() const noexcept { return state_->extents; }
  bool requires_grad() const noexcept { return state_->requires_grad; }

  /// The same variable, gradient and all, without a share in its value: what a backward step
  /// keeps of an operand or result whose value it does not read. value() on it throws.
  variable without_value() const {
    variable handle = *this;
    handle.value_.reset();
    return handle;
  }

  /// Whether a gradient has reached this variable since it was made (or zeroed).
  bool has_grad() const noexcept { return state_->has_grad; }
  /// The gradient; copies share it, so a const copy may still write it (as with shared_ptr).
  tensor_type& grad() const {
    if (!state_->has_grad) throw std::logic_error("attn::grad: no gradient has reached this variable");
    return *state_->grad;
  }

  /// grad += g, for an expression or tensor g of this shape; the first contribution is
  /// written, not added.
  template <operand E>
  void accumulate(const E& expression) const {
    const auto g = as_operand(expression);
    state& s = *state_;
    if (s.has_grad) {
      s.grad->view() = s.grad->view() + g;
    } else {
      if (!s.grad) s.grad.emplace(extents(), uninitialized);
      s.grad->view() = g;
      s.has_grad = true;
    }
  }

  /// grad += g for a tensor that is no longer needed: taken as the gradient when it is the first.
  void accumulate(tensor_type&& g) const {
    state& s = *state_;
    if (s.has_grad) {
      s.grad->view() = s.grad->view() + g.view();
    } else {
      s.grad.emplace(std::move(g));
      s.has_grad = true;
    }
  }

  /// grad (+)= what `write(data, add)` leaves in `data`: for a device primitive that writes its
  /// result (add false, the first contribution) or adds it to what is there (add true).
  template <class Write>
  void accumulate_with(Write&& write) const {
    state& s = *state_;
    if (s.has_grad) {
      write(s.grad->data(), true);
      return;
    }
    if (!s.grad) s.grad.emplace(extents(), uninitialized);
    write(s.grad->data(), false);
    s.has_grad = true;
  }

  /// Sets the gradient to zero, keeping its storage: parameters between optimizer steps.
  void zero_grad() const {
    state& s = *state_;
    if (!s.grad) s.grad.emplace(extents());
    else s.grad->view() = fill<T, Device>(extents(), T{0});
    s.has_grad = true;
  }

  /// Forgets the gradient (it will be written afresh by the next backward pass).
  void clear_grad() const { state_->has_grad = false; }

  /// True when two handles are one variable (one gradient; the value, where both hold it).
  bool same_as(const variable& other) const noexcept { return state_ == other.state_; }
  /// What copies share: the key a tape's notes know the variable by (tape::note_read).
  const void* identity() const noexcept { return state_.get(); }

 private:
  struct state {
    state(const attn::extents<S>& e, bool r) : extents(e), requires_grad(r) {}
    attn::extents<S> extents;
    std::optional<tensor_type> grad;
    bool has_grad = false;
    bool requires_grad;
  };

  tensor_type& checked_value() const {
    if (!value_) throw std::logic_error("attn::grad: a backward step read a value it kept no share in (without_value)");
    return *value_;
  }

  std::shared_ptr<tensor_type> value_;  // null in a without_value() handle
  std::shared_ptr<state> state_;
};

template <class T>
inline constexpr bool is_variable_v = false;
template <class T, class S, class D>
inline constexpr bool is_variable_v<variable<T, S, D>> = true;

namespace detail {
/// to = e, and to += e: kept out of line, so that the callers that view their operands under
/// shared names (view_as) share one copy of each assignment's code.
template <class T, class S, class Device, class E>
[[gnu::noinline]] void assign_to(const tensor_view<T, S, Device>& to, const E& e) {
  to = e;
}
template <class T, class S, class Device, class E>
[[gnu::noinline]] void add_to(const tensor_view<T, S, Device>& to, const E& e) {
  to = to + e;
}
}  // namespace detail

/// v's value under the names of Names (view_as): how an operation that does its work under names
/// of its own reads it.
template <shape_type Names, class T, class S, class Device>
tensor_view<const T, Names, Device> value_as(const variable<T, S, Device>& v) {
  return view_as<Names>(std::as_const(v.value()).view());
}
/// v's gradient under the names of Names, to read.
template <shape_type Names, class T, class S, class Device>
tensor_view<const T, Names, Device> gradient_as(const variable<T, S, Device>& v) {
  return view_as<Names>(std::as_const(v.grad()).view());
}

/// An operation's work written under names of its own (view_as): v's gradient += g, where g is an
/// expression of v's extents under the names Names. The assignment is compiled once for every
/// naming of v's shape (docs/model.md, "Compile time").
template <shape_type Names, class T, class S, class Device, expression E>
  requires std::same_as<typename E::shape_type, Names>
void accumulate_as(const variable<T, S, Device>& v, const E& g) {
  v.accumulate_with([&](T* gradient, bool add) {
    const auto to = view_as<Names>(tensor_view<T, S, Device>(gradient, v.extents()));
    if (add) detail::add_to(to, g);
    else detail::assign_to(to, g);
  });
}

/// A new tensor of shape S holding e, which has S's extents under other names (view_as).
template <shape_type S, expression E, class T = typename E::value_type, class Device = typename E::device_type>
tensor<T, S, Device> evaluate_as(const E& e) {
  tensor<T, S, Device> result(attn::extents<S>::renamed(e.extents()), uninitialized);
  detail::assign_to(view_as<typename E::shape_type>(result.view()), e);
  return result;
}

/// True when the tape should record an operation on these operands: there is a tape and
/// some operand wants a gradient.
template <class... V>
bool recording(const tape* t, const V&... operands) {
  return t != nullptr && (operands.requires_grad() || ...);
}

/// Seeds d(loss)/d(loss) = 1 and replays the tape: every variable the loss depends on that
/// requires a gradient has it accumulated.
template <class T, class Device>
void backward(tape& t, const variable<T, shape<>, Device>& loss) {
  loss.accumulate(fill<T, Device>(loss.extents(), T{1}));
  t.replay();
}

/// backward(), calling complete(identity) for each variable the tape noted (every parameter a
/// module read through grad::cast) as soon as its gradient is final (tape::replay).
template <class T, class Device, class Complete>
void backward(tape& t, const variable<T, shape<>, Device>& loss, Complete&& complete) {
  loss.accumulate(fill<T, Device>(loss.extents(), T{1}));
  t.replay(std::forward<Complete>(complete));
}

}  // namespace attn::grad
