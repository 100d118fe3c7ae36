/// \file
/// TensorBoard event files: SummaryWriter writes scalars as torch.utils.tensorboard does
/// (one file events.out.tfevents.SECONDS.HOSTNAME.PID.N followed by the suffix per writer,
/// TFRecord-framed Event protobufs), and read_scalars reads them back.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tc::io {

/// Writes TensorBoard event files of scalars (torch.utils.tensorboard's SummaryWriter).
class SummaryWriter {
 public:
  /// Creates log_dir (and its parents) and a new event file in it, whose first record
  /// carries the file version TensorBoard checks. Throws "[io] SummaryWriter PATH: reason".
  explicit SummaryWriter(const std::string& log_dir, const std::string& filename_suffix = "");
  /// Flushes and closes; errors there are lost (a destructor cannot throw): call flush()
  /// first to see them.
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  /// One Event with a Summary holding one simple_value (a float, as TensorBoard stores it;
  /// inf and NaN are kept). wall_time: seconds since the epoch; negative: now.
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1);
  /// Hands buffered records to the operating system (TensorBoard then sees them).
  void flush();
  /// The event file's path.
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  [[noreturn]] void fail(int err) const;

  std::string path_;
  std::FILE* file_ = nullptr;
};

/// One scalar of an event file, as read_scalars returns it.
struct ScalarEvent {
  std::string tag;       ///< the scalar's name ("train/loss")
  int64_t step = 0;      ///< the global step
  double wall_time = 0;  ///< seconds since the epoch
  float value = 0;       ///< the value (float, as stored)
};

/// Every simple_value of an event file, in file order. The file is checked as untrusted
/// input: framing, both CRCs of every record, record sizes (at most 64 MiB) and the protobuf
/// encoding; any damage throws a one-line "[io] PATH: record at byte N: what is wrong".
/// Values of other kinds (images, histograms, tensors) and unknown fields are skipped.
std::vector<ScalarEvent> read_scalars(const std::string& path);

}  // namespace tc::io
