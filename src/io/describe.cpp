// describe(): the text `tensorcast inspect` prints for a safetensors file or checkpoint.
#include "tensorcast/io/describe.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "tensorcast/error.h"
#include "tensorcast/io/checkpoint.h"
#include "tensorcast/io/safetensors.h"

namespace tc::io {

namespace {

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream os;
  if (u == 0)
    os << n << " B";
  else
    os << std::fixed << std::setprecision(1) << v << ' ' << units[u];
  return os.str();
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string describe(const std::filesystem::path& path) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(path, ec) ? path / kCheckpointFileName : path;
  const SafetensorsFile f = load_safetensors(file);
  const uint64_t file_bytes = std::filesystem::file_size(file, ec);
  TC_CHECK(!ec, "io", "cannot read the size of ", file.string(), ": ", ec.message());

  uint64_t data_bytes = 0;
  size_t name_w = 4, dtype_w = 5, shape_w = 5;
  for (const auto& [name, t] : f.tensors) {
    data_bytes += t.nbytes();
    name_w = std::max(name_w, name.size());
    dtype_w = std::max(dtype_w, safetensors_dtype_name(t.dtype()).size());
    shape_w = std::max(shape_w, shape_str(t.sizes()).size());
  }

  std::ostringstream os;
  os << file.string() << ": safetensors, " << f.tensors.size() << " tensors, " << human_bytes(data_bytes)
     << " of data (" << file_bytes << " bytes on disk)\n";

  // A checkpoint's directory is described as a checkpoint even when its metadata says
  // nothing: a damaged checkpoint is refused, naming what it lacks, not listed as a plain file.
  if (file != path || claims_checkpoint(f.metadata)) {
    const TrainingState s = training_state_from(f, file.string());
    os << "training checkpoint: epoch " << s.epoch << ", step " << s.step << " (format "
       << checkpoint_metadata(f.metadata, "format_version", file.string()) << ", written by tensorcast "
       << checkpoint_metadata(f.metadata, "tensorcast_version", file.string()) << ")\n";
    auto part = [&](const char* label, const StateDict& sd) {
      uint64_t b = 0;
      for (const auto& [n, t] : sd) b += t.nbytes();
      os << "  " << pad(label, 12) << sd.size() << " tensors, " << human_bytes(b) << '\n';
    };
    part("model", s.model);
    part("optimizer", s.optimizer);
    part("scaler", s.scaler);
    part("data loader", s.data_loader);
    os << "  " << pad("rng", 12) << (s.rng.defined() ? "saved" : "not saved") << '\n';
  }

  os << "metadata:" << (f.metadata.empty() ? " (none)" : "") << '\n';
  for (const auto& [k, v] : f.metadata) os << "  " << k << " = " << v << '\n';

  os << "tensors:\n";
  os << "  " << pad("name", name_w) << "  " << pad("dtype", dtype_w) << "  " << pad("shape", shape_w) << "  bytes\n";
  for (const auto& [name, t] : f.tensors)
    os << "  " << pad(name, name_w) << "  " << pad(std::string(safetensors_dtype_name(t.dtype())), dtype_w) << "  "
       << pad(shape_str(t.sizes()), shape_w) << "  " << t.nbytes() << '\n';
  return os.str();
}

}  // namespace tc::io
