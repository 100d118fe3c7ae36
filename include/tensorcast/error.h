/// \file
/// tc::Error and the checking macros every component uses.
/// Messages start with the component or op in brackets: "[matmul] shapes (2, 3) and (4, 5) ...".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace tc {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tc

/// TC_CHECK(cond, "op", message parts...) throws tc::Error("[op] message").
#define TC_CHECK(cond, op, ...)                                            \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      throw ::tc::Error(::tc::detail::concat("[", op, "] ", __VA_ARGS__)); \
  } while (0)

/// Throws tc::Error("[op] " + the arguments streamed).
#define TC_FAIL(op, ...) throw ::tc::Error(::tc::detail::concat("[", op, "] ", __VA_ARGS__))
