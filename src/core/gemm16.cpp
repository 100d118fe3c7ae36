// The 16-bit GEMM setting (tensorcast/gemm16.h); the backend resolves kAuto.
#include "tensorcast/gemm16.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "tensorcast/error.h"

namespace tc {
namespace {

Gemm16 from_environment() {
  const char* v = std::getenv("TC_CPU_GEMM16");
  if (v == nullptr || *v == '\0') return Gemm16::kAuto;
  const std::string s(v);
  if (s == "auto") return Gemm16::kAuto;
  if (s == "native") return Gemm16::kNative;
  if (s == "float32") return Gemm16::kFloat32;
  TC_FAIL("TC_CPU_GEMM16", "expected auto, native or float32, got '", s, "'");
}

std::atomic<Gemm16>& setting() {
  static std::atomic<Gemm16> mode{from_environment()};
  return mode;
}

}  // namespace

void set_cpu_gemm16(Gemm16 mode) {
  TC_CHECK(mode == Gemm16::kAuto || mode == Gemm16::kNative || mode == Gemm16::kFloat32, "set_cpu_gemm16",
           "unknown mode ", static_cast<int>(mode));
  setting().store(mode, std::memory_order_relaxed);
}

Gemm16 get_cpu_gemm16() { return setting().load(std::memory_order_relaxed); }

std::string_view gemm16_name(Gemm16 mode) {
  switch (mode) {
    case Gemm16::kAuto:
      return "auto";
    case Gemm16::kNative:
      return "native";
    case Gemm16::kFloat32:
      return "float32";
  }
  return "?";
}

}  // namespace tc
