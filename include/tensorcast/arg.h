/// \file
/// TC_ARG: a typed option with a fluent setter, as libtorch's TORCH_ARG does:
/// `Options().lr(0.1).momentum(0.9)`. Its own header so that the libtorch adapter can use
/// it without the tensor headers.
#pragma once

/// Declares a typed option with a fluent setter, as libtorch's TORCH_ARG does:
/// `Options().lr(0.1).momentum(0.9)`.
/// `o.name(v)` sets the option and returns `o`; `o.name()` reads it. The API reference lists
/// each option as a member variable of its options type, with its default.
#define TC_ARG(T, name)                              \
 public:                                             \
  auto& name(const T& v) {                           \
    name##_ = v;                                     \
    return *this;                                    \
  }                                                  \
  const T& name() const noexcept { return name##_; } \
                                                     \
 private:                                            \
  T name##_
