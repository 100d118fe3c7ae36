/// \file
/// safetensors files (https://github.com/huggingface/safetensors): the weights format the
/// Python `safetensors` library and PyTorch read. Layout: an 8-byte little-endian header
/// length N, N bytes of JSON {"__metadata__": {str: str}, name: {dtype, shape,
/// data_offsets}}, then the raw little-endian data, fully indexed by the offsets.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "tensorcast/state_dict.h"

namespace tc::io {

/// The "__metadata__" table: free-form string pairs (training state, versions, notes).
using Metadata = std::map<std::string, std::string>;

/// A safetensors file's contents.
struct SafetensorsFile {
  StateDict tensors;  ///< CPU, contiguous, owning their memory
  Metadata metadata;  ///< the header's "__metadata__" strings
};

/// Writes `tensors` (any strides, CPU or not; written contiguous, names sorted) atomically:
/// a temporary file in the same directory is written, fsynced and renamed over `path`, so
/// a crash leaves either the old file or the new one, never a torn one.
void save_safetensors(const std::filesystem::path& path, const StateDict& tensors, const Metadata& metadata = {});

/// Reads and validates a whole file; any defect throws tc::Error "[io] <path>: <problem>".
SafetensorsFile load_safetensors(const std::filesystem::path& path);

/// The same two steps on memory, for callers that hold the bytes themselves.
std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata = {});
/// Parses a safetensors file held in memory; `source` names it in errors.
SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view source = "<memory>");

/// The spec's dtype names ("F32", "BF16", ...) and back; the parser throws on unknown names.
std::string_view safetensors_dtype_name(DType dtype);

}  // namespace tc::io
