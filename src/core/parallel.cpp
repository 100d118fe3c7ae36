// Intra-op threads: OpenMP (the runtime oneDNN is built with on Debian), so one setting
// governs our loops and oneDNN's primitives alike.
#include "tensorcast/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>

#include "tensorcast/error.h"

// libgomp is not built with ThreadSanitizer, so TSan cannot see the fork and join of a
// parallel region: the calling thread's hand-off to the team (the block of captured
// variables each thread reads on entry) and the team's results read after the join would
// be reported as races. Under TSan parallel_for itself (and so the region GCC outlines
// from it) is not instrumented, and the region announces its fork and join; `fn` is
// instrumented, so races between the chunks of a region, or with other threads, are
// still reported.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TC_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#define TC_TSAN_RELEASE(addr) __tsan_release(addr)
#define TC_NO_SANITIZE_THREAD __attribute__((no_sanitize_thread))
#else
#define TC_TSAN_ACQUIRE(addr) ((void)(addr))
#define TC_TSAN_RELEASE(addr) ((void)(addr))
#define TC_NO_SANITIZE_THREAD
#endif

namespace tc {

void set_num_threads(int n) {
  TC_CHECK(n > 0 && n <= kMaxThreads, "set_num_threads", "expected a thread count in [1, ", kMaxThreads, "], got ", n);
  omp_set_num_threads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

bool in_parallel_region() { return omp_in_parallel() != 0; }

TC_NO_SANITIZE_THREAD void parallel_for(int64_t begin, int64_t end, int64_t grain,
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
  [[maybe_unused]] char region_start = 0, region_end = 0;  // TSan sync objects (their addresses)
  TC_TSAN_RELEASE(&region_start);
#pragma omp parallel num_threads(threads)
  {
    TC_TSAN_ACQUIRE(&region_start);
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
    TC_TSAN_RELEASE(&region_end);
  }
  TC_TSAN_ACQUIRE(&region_end);
  if (error) std::rethrow_exception(error);
}

void parallel_tasks(int64_t tasks, const std::function<void(int64_t)>& fn) {
  std::atomic<int64_t> next{0};
  parallel_for(0, std::min<int64_t>(get_num_threads(), tasks), 1, [&](int64_t, int64_t) {
    for (int64_t task = next.fetch_add(1, std::memory_order_relaxed); task < tasks;
         task = next.fetch_add(1, std::memory_order_relaxed))
      fn(task);
  });
}

}  // namespace tc
