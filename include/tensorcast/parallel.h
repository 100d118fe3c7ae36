// Intra-op parallelism for CPU kernels (OpenMP, which oneDNN uses as well).
#pragma once
#include <cstdint>
#include <functional>

namespace tc {

// set_num_threads / get_num_threads are declared in ops.h (libtorch's place).
bool in_parallel_region();

// Splits [begin, end) into chunks of at least `grain` and runs fn(chunk_begin, chunk_end)
// on the intra-op threads; runs inline when the range is small or already in parallel.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tc
