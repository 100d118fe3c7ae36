// Training progress on the console. On a terminal: one status line redrawn in place
// (carriage return, at most ~10 times a second):
//   epoch 2/5  [=========>          ]  412/938  loss 0.3121  scale 65536  skipped 0  5120 samples/s  ETA 0:41
// When stdout is not a terminal (a log file, a pipe, CI): a plain line every `plain_every`
// steps and at the end of each epoch, so logs stay readable.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tcli {

struct ProgressInfo {
  int64_t epoch = 1, epochs = 1;
  int64_t step = 0, steps_in_epoch = 0;  // within the epoch, 1-based after the first step
  int64_t global_step = 0;
  double loss = 0, loss_scale = 1;
  bool scaler = false;
  int64_t skipped = 0;
  double samples_per_s = 0;
  double eta_s = -1;  // < 0: unknown
};

bool stdout_is_terminal();
std::string format_duration(double seconds);  // 0:41, 12:03, 1:02:03

class Progress {
 public:
  Progress(bool live, int64_t plain_every) : live_(live), plain_every_(plain_every) {}
  ~Progress() { finish(); }
  // A new state; redrawn (terminal) or logged (plain) when due. `force` draws regardless.
  void update(const ProgressInfo& info, bool force = false);
  // Prints a message on its own line (the live bar is cleared first and redrawn later).
  void message(const std::string& text);
  // Ends the live line (a final redraw followed by a newline).
  void finish();
  bool live() const { return live_; }

 private:
  std::string render(const ProgressInfo& info) const;
  bool live_;
  int64_t plain_every_;
  bool drawn_ = false;  // a live line is on screen without a newline
  ProgressInfo last_;
  bool have_last_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tcli
