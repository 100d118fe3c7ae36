// Internal: the process-wide oneDNN CPU engine and a per-thread stream, plus helpers to
// describe tc tensors to oneDNN. oneDNN primitives are costly to create, so each op file
// keeps a cache of primitives keyed by shape, strides and dtypes.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "tensorcast/tensor.h"

namespace tc::cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();  // thread-local

// oneDNN's data type for a tc dtype; throws "[op] dtype X is not supported by oneDNN".
dnnl::memory::data_type dnnl_dtype(DType dt, const char* op);

// A memory descriptor with t's sizes and strides (no copy); 0-d becomes {1}.
dnnl::memory::desc dnnl_desc(const Tensor& t, const char* op);

}  // namespace tc::cpu
