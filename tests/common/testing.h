// Shared test helpers: dtype-aware tolerances, comparisons against float64 references,
// gradcheck against float64 central differences, bitwise comparisons, deterministic
// parameters and gradients, and temporary directories.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "tensorcast/state_dict.h"
#include "tensorcast/tensorcast.h"

// Expects `stmt` to throw tc::Error whose message contains `substr`.
#define TC_EXPECT_ERROR(stmt, substr)                                                                \
  do {                                                                                               \
    try {                                                                                            \
      stmt;                                                                                          \
      ADD_FAILURE() << "expected tc::Error containing \"" << (substr) << "\" from " #stmt;           \
    } catch (const ::tc::Error& e_) {                                                                \
      EXPECT_NE(std::string(e_.what()).find(substr), std::string::npos) << "message: " << e_.what(); \
    }                                                                                                \
  } while (0)

namespace tc::testing {

// |actual - expected| <= atol + rtol * |expected|, elementwise.
struct Tol {
  double atol;
  double rtol;
};

// Tolerance for one op evaluated in `dt` from exactly representable inputs: a few ulps of
// the dtype's epsilon (the result rounds once, plus float32 internal error).
Tol tol_for(DType dt, double ulps = 4.0);

// The floating dtypes every op is checked in (kAllFloat adds float64).
inline const std::vector<DType> kFloatingTypes = {kFloat32, kBFloat16, kFloat16};
inline const std::vector<DType> kAllFloat = {kFloat32, kBFloat16, kFloat16, kFloat64};
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs fn and checks that it throws tc::Error whose message contains every fragment.
template <class F>
::testing::AssertionResult throws_with(F fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments)
      if (msg.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << f << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "a non-tc exception was thrown: " << e.what();
  }
  return ::testing::AssertionFailure() << "no tc::Error was thrown";
}

// Expects fn to throw tc::Error whose message contains `message` (or every one of `parts`).
inline void expect_error(const std::function<void()>& fn, const std::string& message) {
  EXPECT_TRUE(throws_with(fn, {message}));
}
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  EXPECT_TRUE(throws_with(fn, parts));
}

// A tensor of `shape` with values uniform in [lo, hi), exactly representable in `dt`
// (so float64 references see the same inputs). Deterministic for a given seed.
Tensor uniform(const Shape& shape, DType dt, double lo = -2.0, double hi = 2.0, uint64_t seed = 1);

// n class indices in [0, classes), deterministic for a given seed; element 1 (when n > 2)
// is `ignore`, so that ignore_index is always exercised.
std::vector<int64_t> random_targets(int64_t n, int64_t classes, int64_t ignore, uint64_t seed);

// Compares `actual` (any dtype; NaN matches NaN, inf matches inf of the same sign) with
// `expected` values in row-major order.
::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected, Tol tol);
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tol tol);

// Exact equality of values and shape.
::testing::AssertionResult equal(const Tensor& actual, const Tensor& expected);

// Applies a float64 function elementwise to x's values (the reference for unary ops).
std::vector<double> map_ref(const Tensor& x, const std::function<double(double)>& f);

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks the analytic gradient of f at `inputs` (backward in the inputs' dtypes) against
// float64 central differences of f evaluated on float64 copies of the inputs.
// Inputs that do not require grad are held constant. The output is reduced with fixed
// random weights so every output element contributes. The tolerance scales with the
// largest numerical gradient magnitude: |a - n| <= atol * max(1, max|n|) + rtol * |n|.
::testing::AssertionResult gradcheck(const Fn& f, const std::vector<Tensor>& inputs, Tol tol, double eps = 1e-6);

// Checks f's double backward (PyTorch's gradgradcheck): gradcheck of the function
// (inputs, w) -> sum_k <d sum(f(x) * w) / d x_k, v_k>, whose first derivative is taken with
// create_graph (fixed random w and v), so both the derivative of the backward with respect
// to the inputs and with respect to the incoming gradient w are checked. A second
// derivative that backward leaves undefined counts as zero. Meant for float64 inputs.
::testing::AssertionResult gradgradcheck(const Fn& f, const std::vector<Tensor>& inputs, Tol tol, double eps = 1e-6);

// Same dtype, same shape and the same bytes (so NaN payloads and signed zeros count).
::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b);
// The same keys, each holding bits_equal tensors.
::testing::AssertionResult dicts_equal(const StateDict& a, const StateDict& b);

// A parameter (requires grad) of `shape` with values uniform in [-1, 1), exact in `dt`.
Tensor make_param(const Shape& shape, DType dt, uint64_t seed);

// A deterministic gradient for (parameter, step, which): values uniform in [-1, 1), exact
// in p's dtype, the same in any run. The seed is seed_base + 37 * step + which; each test
// file passes its own seed_base.
Tensor grad_for(uint64_t seed_base, const Tensor& p, int step, int which = 0);

// Runs `steps` optimizer steps on `params` (an optimizer built by `make`, gradients from
// grad_for(seed_base, ...); parameter 2 gets its first gradient at step 2), saving the state
// dict and loading it into a new optimizer over parameter copies after `split` steps (-1:
// never). Returns the final parameters and state: a resumed run must equal an unbroken one.
struct RunResult {
  std::vector<Tensor> params;
  StateDict state;
};
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
RunResult run_with_resume(const MakeOptimizer& make, std::vector<Tensor> params, uint64_t seed_base, int steps,
                          int split);

// A whole file's bytes ("" when it cannot be read).
std::string read_file_bytes(const std::string& path);

// A fresh, empty directory temp_directory_path()/tc_<prefix>_<pid>_<n> (n counts the
// TempDirs of the process), created by the constructor and removed with its contents by
// the destructor.
struct TempDir {
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path / name; }

  std::filesystem::path path;
};

}  // namespace tc::testing
