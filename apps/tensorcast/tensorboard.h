// TensorBoard event files for `tensorcast train --tensorboard DIR` and `tensorcast report`:
// the run's scalars under fixed tags, so runs of different models and precisions line up
// in one `tensorboard --logdir` view.
#pragma once
#include <tensorcast/amp/fp8.h>
#include <tensorcast/io/summary_writer.h>

#include <cstdint>
#include <string>

namespace tcli {

// Writes a run's scalars to TensorBoard event files under dir.
//   train/loss train/lr train/grad_norm  amp/loss_scale amp/skipped_steps
//   perf/samples_per_s perf/peak_memory_mib  test/accuracy test/loss test/bits_per_byte
// and in an fp8 run, per linear layer L and quantized tensor T (input, weight, grad_output):
//   fp8_amax/L.T fp8_saturated/L.T fp8_flushed/L.T (shares of the values) and fp8_scale/L.T,
//   or fp8_scale_min/L.T and fp8_scale_max/L.T where the scales are per row or block
class TensorBoardLog {
 public:
  explicit TensorBoardLog(const std::string& dir);  // throws tc::Error on an unusable dir
  void step(int64_t step, double loss, double lr, double loss_scale, int64_t skipped_total,
            double grad_norm /* <0: not tracked */, double samples_per_s, int64_t peak_memory_bytes);
  void epoch(int64_t step, double test_accuracy /* <0: none */, double test_loss,
             double test_bits_per_byte /* <0: none */);
  void fp8(int64_t step, const std::string& layer, const tc::fp8::LinearStats& stats, bool one_scale_per_tensor);
  void flush();

 private:
  tc::io::SummaryWriter writer_;
};

}  // namespace tcli
