// tc_safetensors_edit: rewrites a safetensors file (a checkpoint, say) with entries
// changed, for crafting damaged or hostile inputs in tests and for repairs by hand.
//
//   tc_safetensors_edit IN OUT [--meta KEY=VALUE]... [--drop NAME]...
//                              [--tensor NAME=DTYPE:SHAPE:VALUES]...
//
// SHAPE is comma-separated sizes ("" for 0-d, "0" for an empty 1-d tensor); VALUES are
// comma-separated numbers (inf, nan accepted), as many as SHAPE holds. DTYPE is one of
// F64 F32 BF16 F16 I64 I32 U8. Example: --tensor loader.seed=I64:0: makes a seed of shape [0].
#include <tensorcast/io/safetensors.h>
#include <tensorcast/ops.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

tc::DType dtype_of(const std::string& name) {
  const std::pair<const char*, tc::DType> names[] = {
      {"F64", tc::kFloat64}, {"F32", tc::kFloat32}, {"BF16", tc::kBFloat16}, {"F16", tc::kFloat16},
      {"I64", tc::kInt64},   {"I32", tc::kInt32},   {"U8", tc::kUInt8}};
  for (const auto& [n, dt] : names)
    if (name == n) return dt;
  throw tc::Error("unknown dtype '" + name + "' (use F64 F32 BF16 F16 I64 I32 U8)");
}

// NAME=DTYPE:SHAPE:VALUES
std::pair<std::string, tc::Tensor> parse_tensor(const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::vector<std::string> parts =
      eq == std::string::npos ? std::vector<std::string>{} : split(spec.substr(eq + 1), ':');
  if (parts.size() != 3) throw tc::Error("--tensor expects NAME=DTYPE:SHAPE:VALUES, got '" + spec + "'");
  tc::Shape shape;
  for (const auto& s : split(parts[1], ',')) shape.push_back(std::stoll(s));
  std::vector<double> values;
  for (const auto& v : split(parts[2], ',')) values.push_back(std::strtod(v.c_str(), nullptr));
  const tc::DType dt = dtype_of(parts[0]);
  // Built in float64 and converted: exact for every value an int64 test needs (< 2^53).
  return {spec.substr(0, eq), tc::tensor(values, shape, tc::kFloat64).to(dt)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: tc_safetensors_edit IN OUT [--meta K=V]... [--drop NAME]... [--tensor NAME=DTYPE:SHAPE:VALUES]...\n");
    return 2;
  }
  try {
    tc::io::SafetensorsFile f = tc::io::load_safetensors(argv[1]);
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--meta") {
        const size_t eq = value.find('=');
        if (eq == std::string::npos) throw tc::Error("--meta expects KEY=VALUE, got '" + value + "'");
        f.metadata[value.substr(0, eq)] = value.substr(eq + 1);
      } else if (flag == "--drop") {
        if (f.tensors.erase(value) == 0 && f.metadata.erase(value) == 0)
          throw tc::Error("no entry '" + value + "' to drop");
      } else if (flag == "--tensor") {
        auto [name, t] = parse_tensor(value);
        f.tensors[name] = t;
      } else {
        throw tc::Error("unknown flag " + flag);
      }
    }
    if ((argc - 3) % 2 != 0) throw tc::Error(std::string("flag ") + argv[argc - 1] + " needs a value");
    tc::io::save_safetensors(argv[2], f.tensors, f.metadata);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tc_safetensors_edit: %s\n", e.what());
    return 1;
  }
  return 0;
}
