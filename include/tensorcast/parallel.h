/// \file
/// Intra-op parallelism for CPU kernels (OpenMP, which oneDNN uses as well).
#pragma once
#include <cstdint>
#include <functional>

namespace tc {

/// Far above any core count; the OpenMP runtime itself fails (or crashes) on tens of
/// thousands of threads, so larger requests are refused with an error.
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int n);  ///< intra-op threads for CPU kernels (and oneDNN), 1..kMaxThreads
/// The number of intra-op threads.
int get_num_threads();

/// True inside a parallel_for body.
bool in_parallel_region();

/// Splits [begin, end) into chunks of at least `grain` and runs fn(chunk_begin, chunk_end)
/// on the intra-op threads; runs inline when the range is small or already in parallel.
void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

/// Runs fn(task) for every task in [0, tasks) on the intra-op threads, each thread taking
/// the next task when it finishes one: for kernels whose threads run at uneven rates (on a
/// shared host, or a shared matrix unit), where equal shares would leave one thread waiting.
/// Inline when there is one thread or already in parallel.
void parallel_tasks(int64_t tasks, const std::function<void(int64_t)>& fn);

}  // namespace tc
