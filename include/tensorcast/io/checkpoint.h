/// \file
/// Training checkpoints: everything a run needs to resume bit-identically, in ONE
/// safetensors file `dir/checkpoint.safetensors` (readable by any safetensors reader).
/// Tensors are prefixed by owner ("model.", "optim.", "scaler.", "loader.", "rng.");
/// epoch, step and versions live in the metadata as decimal strings.
#pragma once
#include <cstdint>
#include <filesystem>

#include "tensorcast/io/safetensors.h"
#include "tensorcast/state_dict.h"

namespace tc::io {

/// The checkpoint format this build writes ("format" in the metadata).
inline constexpr int kCheckpointFormatVersion = 1;
/// The file save_checkpoint writes in a run's directory.
inline constexpr const char* kCheckpointFileName = "checkpoint.safetensors";
/// The previous checkpoint, kept when a new one is written.
inline constexpr const char* kPreviousCheckpointFileName = "checkpoint.prev.safetensors";

/// Everything a run needs to resume exactly.
struct TrainingState {
  StateDict model;        ///< module.state_dict()
  StateDict optimizer;    ///< optimizer.state_dict()
  StateDict scaler;       ///< scaler.state_dict() (may be empty: fp32/bf16 runs)
  StateDict data_loader;  ///< loader position and shuffling state
  Tensor rng;             ///< tc::get_rng_state(); undefined = not saved
  int64_t epoch = 0;      ///< epochs completed
  int64_t step = 0;       ///< optimizer steps taken
  /// Free-form run description ("precision", "model", "seed", ...). The keys "format",
  /// "format_version", "epoch", "step" and "tensorcast_version" are reserved.
  Metadata metadata;
};

/// Writes dir/checkpoint.safetensors atomically (creating `dir` if needed); the checkpoint
/// it replaces is kept as dir/checkpoint.prev.safetensors.
void save_checkpoint(const std::filesystem::path& dir, const TrainingState& state);

/// Reads dir/checkpoint.safetensors (or `dir` itself when it names a file). Throws
/// "[io] ..." on a missing, corrupt or foreign file; nothing is modified on failure
/// (the caller applies the returned state, e.g. tc::set_rng_state(state.rng)).
TrainingState load_checkpoint(const std::filesystem::path& dir);

/// True when `dir` holds a checkpoint file (its validity is checked by load_checkpoint).
bool has_checkpoint(const std::filesystem::path& dir);

/// Splits a parsed file into its parts / joins them; used by load/save and by `inspect`.
/// training_state_from throws "[io] <source>: ..." naming the metadata key that is missing
/// or invalid.
TrainingState training_state_from(const SafetensorsFile& file, std::string_view source);
/// The safetensors file save_checkpoint writes for `state`.
SafetensorsFile to_safetensors(const TrainingState& state);

/// The value of a reserved metadata key; throws "[io] <source>: checkpoint metadata lacks
/// '<key>'" when it is absent.
const std::string& checkpoint_metadata(const Metadata& m, const char* key, std::string_view source);

/// True when the metadata says the file is a training checkpoint: "format" names the
/// checkpoint format, or, without "format", a key only checkpoints carry is present (a
/// damaged checkpoint, which training_state_from then refuses, not a plain file).
bool claims_checkpoint(const Metadata& m);

}  // namespace tc::io
