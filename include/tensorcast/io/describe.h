// A human-readable listing of a safetensors file or training checkpoint, for
// `tensorcast inspect`.
#pragma once
#include <filesystem>
#include <string>

namespace tc::io {

// Lists tensors sorted by name (name, dtype, shape, bytes), totals, and the metadata; a
// training checkpoint (a directory or its file) also gets its epoch, step and a count of
// tensors per part. Throws "[io] ..." on unreadable or invalid files.
std::string describe(const std::filesystem::path& path);

}  // namespace tc::io
