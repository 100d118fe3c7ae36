#include "backend/cpu/onednn/context.h"

#include "core/tensor_impl.h"

namespace tc::cpu {

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

dnnl::memory::data_type dnnl_dtype(DType dt, const char* op) {
  switch (dt) {
    case DType::Float32:
      return dnnl::memory::data_type::f32;
    case DType::BFloat16:
      return dnnl::memory::data_type::bf16;
    case DType::Float16:
      return dnnl::memory::data_type::f16;
    case DType::Int32:
      return dnnl::memory::data_type::s32;
    case DType::UInt8:
      return dnnl::memory::data_type::u8;
    default:
      TC_FAIL(op, "dtype ", dtype_name(dt), " is not supported by oneDNN");
  }
}

dnnl::memory::desc dnnl_desc(const Tensor& t, const char* op) {
  dnnl::memory::dims dims(t.sizes().begin(), t.sizes().end());
  dnnl::memory::dims strides(t.strides().begin(), t.strides().end());
  if (dims.empty()) {
    dims = {1};
    strides = {1};
  }
  return dnnl::memory::desc(dims, dnnl_dtype(t.dtype(), op), strides);
}

}  // namespace tc::cpu
