/// \file
/// A human-readable listing of a safetensors file or training checkpoint, for
/// `tensorcast inspect`.
#pragma once
#include <filesystem>
#include <string>

namespace tc::io {

/// Lists tensors sorted by name (name, dtype, shape, bytes), totals, and the metadata; a
/// training checkpoint (a directory or its file) also gets its epoch, step and a count of
/// tensors per part. Throws "[io] ..." on unreadable or invalid files; for a checkpoint
/// (a directory, or a file whose metadata claims to be one) with a metadata key missing or
/// invalid, "[io] FILE: ..." naming the key.
std::string describe(const std::filesystem::path& path);

}  // namespace tc::io
