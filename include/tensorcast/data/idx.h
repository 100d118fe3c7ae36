/// \file
/// Reading IDX files, the format of the MNIST family (http://yann.lecun.com/exdb/mnist/):
/// a 4-byte magic `00 00 <type> <ndim>`, ndim big-endian uint32 sizes, then the elements in
/// row-major order, big-endian. Files may be gzip-compressed or raw (zlib reads both).
#pragma once
#include <string>

#include "tensorcast/tensor.h"

namespace tc::data {

/// Reads the IDX file at `path` into a new contiguous CPU tensor of the file's shape.
/// Element types map to the nearest tensorcast dtype (there is no int8/int16 dtype, so
/// those widen to int32):
/// \verbatim
///   0x08 uint8 -> kUInt8   0x09 int8 -> kInt32   0x0B int16 -> kInt32
///   0x0C int32 -> kInt32   0x0D float32 -> kFloat32   0x0E float64 -> kFloat64
/// \endverbatim
/// A missing, truncated, corrupt or oversized file raises a tc::Error starting with
/// "[data]" that names the path and the problem; nothing is allocated from an unchecked
/// header (memory grows only with the data actually read).
Tensor read_idx(const std::string& path);

}  // namespace tc::data
