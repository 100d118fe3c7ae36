// The console progress display (see progress.h).
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tcli {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const long long s = std::llround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

std::string Progress::render(const ProgressInfo& p) const {
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld  ", static_cast<long long>(p.epoch),
                static_cast<long long>(p.epochs));
  out += buf;
  if (live_ && p.steps_in_epoch > 0) {
    constexpr int kWidth = 20;
    const int filled = static_cast<int>(kWidth * std::min<double>(1.0, double(p.step) / double(p.steps_in_epoch)));
    out += "[";
    for (int i = 0; i < kWidth; ++i) out += i < filled ? '=' : (i == filled ? '>' : ' ');
    out += "]  ";
  }
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f", static_cast<long long>(p.step),
                static_cast<long long>(p.steps_in_epoch), p.loss);
  out += buf;
  if (p.scaler) {
    std::snprintf(buf, sizeof buf, "  scale %g  skipped %lld", p.loss_scale, static_cast<long long>(p.skipped));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "  %.0f samples/s  ETA %s", p.samples_per_s, format_duration(p.eta_s).c_str());
  out += buf;
  return out;
}

void Progress::update(const ProgressInfo& info, bool force) {
  last_ = info;
  have_last_ = true;
  const auto now = std::chrono::steady_clock::now();
  if (live_) {
    if (!force && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    // \r, the line, then clear to the end of the line (the new one may be shorter).
    std::printf("\r%s\x1b[K", render(info).c_str());
    std::fflush(stdout);
    drawn_ = true;
    last_draw_ = now;
    return;
  }
  if (force || (plain_every_ > 0 && info.global_step % plain_every_ == 0)) {
    std::printf("%s\n", render(info).c_str());
    std::fflush(stdout);
  }
}

void Progress::message(const std::string& text) {
  if (live_ && drawn_) {
    std::printf("\r\x1b[K");
    drawn_ = false;
  }
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (live_ && drawn_) {
    if (have_last_) std::printf("\r%s\x1b[K", render(last_).c_str());
    std::printf("\n");
    std::fflush(stdout);
    drawn_ = false;
  }
}

}  // namespace tcli
