// Intra-op threads: OpenMP (the runtime oneDNN is built with on Debian), so one setting
// governs our loops and oneDNN's primitives alike.
#include "tensorcast/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>

#include "tensorcast/error.h"
#include "tensorcast/ops.h"

namespace tc {

void set_num_threads(int n) {
  TC_CHECK(n > 0, "set_num_threads", "expected a positive thread count, got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

bool in_parallel_region() { return omp_in_parallel() != 0; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int threads = static_cast<int>(std::min<int64_t>(get_num_threads(), max_chunks));
  if (threads <= 1 || in_parallel_region()) {
    fn(begin, end);
    return;
  }
  // Exceptions must not escape an OpenMP region: keep the first and rethrow after.
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk;
    const int64_t e = std::min(end, b + chunk);
    if (b < e) {
      try {
        fn(b, e);
      } catch (...) {
#pragma omp critical(tc_parallel_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tc
