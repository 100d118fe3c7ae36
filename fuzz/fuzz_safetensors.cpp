// safetensors parsing (src/io/safetensors.cpp): any bytes either parse or raise tc::Error.
// What parses must be CPU, contiguous tensors that serialize and parse back to the same
// names, dtypes, shapes, bytes and metadata. Inputs are mutated both byte-wise and
// structurally (safetensors_mutator.h), so the checks behind the header are reached.
#include <tensorcast/io/safetensors.h>

#include <cstring>

#include "fuzz_util.h"
#include "safetensors_mutator.h"

namespace {

bool same_bytes(const tc::Tensor& a, const tc::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::refused_or_ok([&] {
    const auto f = tc::io::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "<fuzz>");
    for (const auto& [name, t] : f.tensors)
      if (!t.is_contiguous() || t.device() != tc::Device{})
        fuzz::broken("a parsed tensor is not contiguous on the CPU");
    const std::string again = tc::io::serialize_safetensors(f.tensors, f.metadata);
    const auto g = tc::io::parse_safetensors(again, "<fuzz round trip>");
    if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size())
      fuzz::broken("round trip changed the metadata or the tensor count");
    for (const auto& [name, t] : f.tensors) {
      const auto it = g.tensors.find(name);
      if (it == g.tensors.end() || !same_bytes(t, it->second)) fuzz::broken("round trip changed a tensor");
    }
  });
  return 0;
}

TC_FUZZ_SAFETENSORS_MUTATOR()
