// TensorBoardLog: the tags of `tensorcast train --tensorboard` (see tensorboard.h).
#include "tensorboard.h"

namespace tcli {

TensorBoardLog::TensorBoardLog(const std::string& dir) : writer_(dir) {}

void TensorBoardLog::step(int64_t step, double loss, double lr, double loss_scale, int64_t skipped_total,
                          double grad_norm, double samples_per_s, int64_t peak_memory_bytes) {
  writer_.add_scalar("train/loss", loss, step);  // inf/NaN stay: TensorBoard shows a diverged run as such
  writer_.add_scalar("train/lr", lr, step);
  writer_.add_scalar("amp/loss_scale", loss_scale, step);
  writer_.add_scalar("amp/skipped_steps", double(skipped_total), step);
  if (!(grad_norm < 0)) writer_.add_scalar("train/grad_norm", grad_norm, step);  // NaN: an overflow, kept
  writer_.add_scalar("perf/samples_per_s", samples_per_s, step);
  writer_.add_scalar("perf/peak_memory_mib", double(peak_memory_bytes) / (1 << 20), step);
}

void TensorBoardLog::epoch(int64_t step, double test_accuracy, double test_loss, double test_bits_per_byte) {
  if (test_accuracy >= 0) writer_.add_scalar("test/accuracy", test_accuracy, step);
  writer_.add_scalar("test/loss", test_loss, step);
  if (!(test_bits_per_byte < 0)) writer_.add_scalar("test/bits_per_byte", test_bits_per_byte, step);
}

void TensorBoardLog::fp8(int64_t step, const std::string& layer, const tc::fp8::LinearStats& stats,
                         bool one_scale_per_tensor) {
  for (int role = 0; role < 3; ++role) {
    const tc::fp8::QuantizationStats& q = stats.roles[static_cast<size_t>(role)];
    if (q.quantizations == 0) continue;
    const std::string name =
        layer + "." + std::string(tc::fp8::role_name(static_cast<tc::fp8::LinearState::Role>(role)));
    writer_.add_scalar("fp8_amax/" + name, q.amax, step);
    if (one_scale_per_tensor) {
      writer_.add_scalar("fp8_scale/" + name, q.scale_min, step);
    } else {
      writer_.add_scalar("fp8_scale_min/" + name, q.scale_min, step);
      writer_.add_scalar("fp8_scale_max/" + name, q.scale_max, step);
    }
    writer_.add_scalar("fp8_saturated/" + name, q.share(q.saturated), step);
    writer_.add_scalar("fp8_flushed/" + name, q.share(q.flushed), step);
  }
}

void TensorBoardLog::flush() { writer_.flush(); }

}  // namespace tcli
