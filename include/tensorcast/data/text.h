/// \file
/// Byte-level language-modelling data: a file's bytes are the tokens (vocabulary 256).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tensorcast/data/dataset.h"

namespace tc::data {

/// All bytes of the file at `path` as a uint8 tensor (N). "[data]" error when unreadable.
Tensor read_bytes(const std::string& path);

/// Windows of `context` bytes and their next-byte targets. Example i starts at
/// s = i * stride:  data = bytes[s : s+T] (int64, (T)), target = bytes[s+1 : s+T+1].
///
/// Sampling (a choice, documented): by default stride = context, i.e. strided,
/// non-overlapping windows, so one epoch reads every byte once; randomness comes from the
/// DataLoader's seeded shuffle of window order. stride = 1 gives every offset (the classic
/// "random window" sampler when shuffled, with epochs `context` times longer).
/// size() = (N - 1 - context) / stride + 1; a file shorter than context + 1 bytes is an error.
class TextDataset : public Dataset {
 public:
  /// The bytes of the file at `path` (see the class description for context and stride).
  TextDataset(const std::string& path, int64_t context, std::optional<int64_t> stride = {});
  TextDataset(Tensor bytes, int64_t context, std::optional<int64_t> stride = {});  ///< uint8 (N)
  /// The number of windows.
  int64_t size() const override;
  /// Window `index` (see the class description): data and target, int64 (context).
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  /// The window length.
  int64_t context() const noexcept { return context_; }
  /// The step between windows' starts.
  int64_t stride() const noexcept { return stride_; }
  /// The text, uint8 (N).
  const Tensor& bytes() const noexcept { return bytes_; }

 private:
  void init(int64_t context, std::optional<int64_t> stride, const std::string& what);
  Tensor bytes_;
  int64_t context_ = 0, stride_ = 0, size_ = 0;
};

}  // namespace tc::data
