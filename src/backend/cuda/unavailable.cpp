// What tests and tools ask of the CUDA backend in a build without it: cuDNN's presence and
// its plan cache. Kernels need no stubs: such a build registers no CUDA kernel table
// (backend/registry.cpp), so each kernel a CUDA tensor reaches says so.
#if !defined(TC_WITH_CUDA)
#include "backend/cuda/conv.h"

namespace tc::gpu {

bool conv2d_available() { return false; }
size_t conv2d_cache_size() { return 0; }

}  // namespace tc::gpu
#endif
