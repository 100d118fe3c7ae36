// Training checkpoints as one safetensors file (see include/tensorcast/io/checkpoint.h).
#include "tensorcast/io/checkpoint.h"

#include <charconv>
#include <system_error>

#include "io/atomic_file.h"
#include "tensorcast/version.h"

namespace tc::io {

namespace {

constexpr std::string_view kFormat = "tensorcast.checkpoint";
constexpr const char* kReserved[] = {"format", "format_version", "epoch", "step", "tensorcast_version"};
constexpr std::string_view kRngKey = "rng.cpu";

struct Part {
  std::string_view prefix;
  StateDict TrainingState::*member;
};
constexpr Part kParts[] = {
    {"model.", &TrainingState::model},
    {"optim.", &TrainingState::optimizer},
    {"scaler.", &TrainingState::scaler},
    {"loader.", &TrainingState::data_loader},
};

bool is_reserved(std::string_view key) {
  for (const char* r : kReserved)
    if (key == r) return true;
  return false;
}

int64_t read_int(const Metadata& m, const char* key, std::string_view source) {
  int64_t v = 0;
  const std::string& s = checkpoint_metadata(m, key, source);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  TC_CHECK(ec == std::errc() && end == s.data() + s.size(), "io", source, ": checkpoint metadata '", key, "' is \"", s,
           "\", not an integer");
  return v;
}

}  // namespace

const std::string& checkpoint_metadata(const Metadata& m, const char* key, std::string_view source) {
  const auto it = m.find(key);
  TC_CHECK(it != m.end(), "io", source, ": checkpoint metadata lacks '", key, "'");
  return it->second;
}

bool claims_checkpoint(const Metadata& m) {
  const auto fmt = m.find("format");
  if (fmt != m.end()) return fmt->second == kFormat;
  return m.count("format_version") != 0 || m.count("tensorcast_version") != 0;
}

SafetensorsFile to_safetensors(const TrainingState& state) {
  SafetensorsFile f;
  for (const auto& part : kParts)
    for (const auto& [name, t] : state.*part.member) f.tensors.emplace(std::string(part.prefix) + name, t);
  if (state.rng.defined()) f.tensors.emplace(std::string(kRngKey), state.rng);
  for (const auto& [k, v] : state.metadata) {
    TC_CHECK(!is_reserved(k), "io", "checkpoint metadata key '", k, "' is reserved; use another name");
    f.metadata.emplace(k, v);
  }
  f.metadata["format"] = std::string(kFormat);
  f.metadata["format_version"] = std::to_string(kCheckpointFormatVersion);
  f.metadata["epoch"] = std::to_string(state.epoch);
  f.metadata["step"] = std::to_string(state.step);
  f.metadata["tensorcast_version"] = TENSORCAST_VERSION;
  return f;
}

TrainingState training_state_from(const SafetensorsFile& file, std::string_view source) {
  auto fmt = file.metadata.find("format");
  TC_CHECK(fmt != file.metadata.end(), "io", source,
           ": not a tensorcast training checkpoint (its metadata lacks 'format')");
  TC_CHECK(fmt->second == kFormat, "io", source, ": not a tensorcast training checkpoint (metadata 'format' is not \"",
           kFormat, "\")");
  const int64_t version = read_int(file.metadata, "format_version", source);
  TC_CHECK(version >= 1 && version <= kCheckpointFormatVersion, "io", source, ": checkpoint format version ", version,
           " is not supported (this tensorcast reads 1..", kCheckpointFormatVersion, "; upgrade tensorcast)");
  // Not used to read the file, but every writer stores it and `inspect` shows it: a file
  // without it was not written whole by tensorcast.
  checkpoint_metadata(file.metadata, "tensorcast_version", source);
  TrainingState s;
  s.epoch = read_int(file.metadata, "epoch", source);
  s.step = read_int(file.metadata, "step", source);
  TC_CHECK(s.epoch >= 0 && s.step >= 0, "io", source, ": negative epoch or step in checkpoint metadata");
  for (const auto& [k, v] : file.metadata)
    if (!is_reserved(k)) s.metadata.emplace(k, v);
  for (const auto& [name, t] : file.tensors) {
    if (name == kRngKey) {
      TC_CHECK(t.dtype() == kUInt8 && t.dim() == 1, "io", source, ": '", name, "' is not a 1-d U8 generator state");
      s.rng = t;
      continue;
    }
    bool placed = false;
    for (const auto& part : kParts) {
      if (name.size() > part.prefix.size() && name.compare(0, part.prefix.size(), part.prefix) == 0) {
        (s.*part.member).emplace(name.substr(part.prefix.size()), t);
        placed = true;
        break;
      }
    }
    TC_CHECK(placed, "io", source, ": tensor '", name,
             "' belongs to no part of a checkpoint (expected prefix model., optim., scaler., loader. or rng.)");
  }
  return s;
}

bool has_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / kCheckpointFileName, ec);
}

void save_checkpoint(const std::filesystem::path& dir, const TrainingState& state) {
  const SafetensorsFile f = to_safetensors(state);  // validates before touching the disk
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TC_CHECK(!ec, "io", "cannot create checkpoint directory ", dir.string(), ": ", ec.message());
  const auto current = dir / kCheckpointFileName;
  remove_stale_temp_files(dir);  // what saves killed mid-write left behind
  // Keep the checkpoint being replaced: link it to a temporary name, then rename that over
  // the .prev file, so at every instant both names hold a complete file (or none yet).
  if (std::filesystem::is_regular_file(current, ec)) {
    const auto prev = dir / kPreviousCheckpointFileName;
    const auto prev_tmp = dir / (std::string(".") + kPreviousCheckpointFileName + ".tmp");
    std::filesystem::remove(prev_tmp, ec);
    std::filesystem::create_hard_link(current, prev_tmp, ec);
    if (ec) std::filesystem::copy_file(current, prev_tmp, std::filesystem::copy_options::overwrite_existing, ec);
    if (!ec) std::filesystem::rename(prev_tmp, prev, ec);
    TC_CHECK(!ec, "io", "cannot keep the previous checkpoint as ", prev.string(), ": ", ec.message());
  }
  save_safetensors(current, f.tensors, f.metadata);
}

TrainingState load_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto file = std::filesystem::is_directory(dir, ec) ? dir / kCheckpointFileName : dir;
  TC_CHECK(std::filesystem::exists(file, ec), "io", "no checkpoint at ", file.string(),
           " (was it written with --checkpoint DIR?)");
  return training_state_from(load_safetensors(file), file.string());
}

}  // namespace tc::io
