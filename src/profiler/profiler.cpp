// tc::profiler: a stack of open records on the profiling thread, folded into totals per
// name as each record closes. Self time = a record's time minus its children's.
#include "tensorcast/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "profiler/hooks.h"
#include "tensorcast/allocator.h"
#include "tensorcast/error.h"

namespace tc::profiler {
namespace detail {

thread_local constinit bool t_recording TC_TLS_FAST = false;

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

int64_t allocated_total() { return memory_stats().total_allocated_bytes; }

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Profile::State {
  struct Frame {
    OpStat* stat;
    Clock::time_point start;
    double child_ms = 0;
    int64_t alloc_start = 0;
    int64_t child_alloc = 0;
  };
  std::unordered_map<std::string, OpStat> stats;
  std::vector<Frame> stack;
  std::string key;  // scratch for name + suffix
  Clock::time_point start, end;
  bool recording = true;
  double top_level_ms = 0;  // sum of the outermost records' totals
};

namespace {
thread_local Profile::State* t_state = nullptr;
}  // namespace

namespace detail {

void enter(std::string_view name, std::string_view suffix) {
  Profile::State& s = *t_state;
  s.key.assign(name);
  s.key.append(suffix);
  auto it = s.stats.find(s.key);
  if (it == s.stats.end()) it = s.stats.emplace(s.key, OpStat{s.key}).first;
  s.stack.push_back({&it->second, Clock::now(), 0.0, allocated_total(), 0});
}

void exit() {
  if (t_state == nullptr || t_state->stack.empty()) return;  // the Profile stopped inside this record
  Profile::State& s = *t_state;
  const Profile::State::Frame f = s.stack.back();
  s.stack.pop_back();
  const double ms = ms_between(f.start, Clock::now());
  const int64_t alloc = allocated_total() - f.alloc_start;
  f.stat->calls += 1;
  f.stat->total_ms += ms;
  f.stat->self_ms += ms - f.child_ms;
  f.stat->self_alloc_bytes += alloc - f.child_alloc;
  if (s.stack.empty()) {
    s.top_level_ms += ms;
  } else {
    s.stack.back().child_ms += ms;
    s.stack.back().child_alloc += alloc;
  }
}

}  // namespace detail

Profile::Profile() : state_(new State) {
  TC_CHECK(t_state == nullptr, "profiler", "a Profile is already recording on this thread; profiles do not nest");
  state_->start = Clock::now();
  t_state = state_;
  detail::t_recording = true;
}

Profile::~Profile() {
  stop();
  delete state_;
}

void Profile::stop() {
  if (!state_->recording) return;
  state_->end = Clock::now();
  state_->recording = false;
  state_->stack.clear();
  t_state = nullptr;
  detail::t_recording = false;
}

double Profile::wall_ms() const { return ms_between(state_->start, state_->recording ? Clock::now() : state_->end); }

std::vector<OpStat> Profile::key_averages() const {
  std::vector<OpStat> out;
  out.reserve(state_->stats.size());
  for (const auto& [name, st] : state_->stats) out.push_back(st);
  std::sort(out.begin(), out.end(), [](const OpStat& a, const OpStat& b) {
    return a.self_ms != b.self_ms ? a.self_ms > b.self_ms : a.name < b.name;
  });
  return out;
}

std::string Profile::table(int top, int64_t per) const {
  const double div = per > 1 ? static_cast<double>(per) : 1.0;
  const double wall = wall_ms();
  const std::vector<OpStat> stats = key_averages();
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-32s %10s %10s %10s %7s %10s\n", "record", per > 1 ? "calls/step" : "calls",
                "self ms", "total ms", "self %", "self MiB");
  out += line;
  int shown = 0;
  for (const OpStat& s : stats) {
    if (shown++ >= top) continue;
    std::snprintf(line, sizeof line, "%-32.32s %10.1f %10.3f %10.3f %6.1f%% %10.2f\n", s.name.c_str(),
                  static_cast<double>(s.calls) / div, s.self_ms / div, s.total_ms / div,
                  wall > 0 ? 100.0 * s.self_ms / wall : 0.0, static_cast<double>(s.self_alloc_bytes) / div / 1048576.0);
    out += line;
  }
  if (shown > top) {
    double rest = 0;
    for (size_t i = static_cast<size_t>(top); i < stats.size(); ++i) rest += stats[i].self_ms;
    char label[48];
    std::snprintf(label, sizeof label, "(%zu more records)", stats.size() - static_cast<size_t>(top));
    std::snprintf(line, sizeof line, "%-32s %10s %10.3f %10s %6.1f%%\n", label, "", rest / div, "",
                  wall > 0 ? 100.0 * rest / wall : 0.0);
    out += line;
  }
  const double outside = wall - state_->top_level_ms;
  std::snprintf(line, sizeof line, "%-32s %10s %10.3f %10s %6.1f%%\n", "(outside any record)", "", outside / div, "",
                wall > 0 ? 100.0 * outside / wall : 0.0);
  out += line;
  std::snprintf(line, sizeof line, "%-32s %10s %10.3f %10s %6.1f%%\n", "(wall)", "", wall / div, "", 100.0);
  out += line;
  return out;
}

RecordFunction::RecordFunction(const char* name) : active_(detail::t_recording) {
  if (active_) detail::enter(name, {});
}
RecordFunction::~RecordFunction() {
  if (active_) detail::exit();
}

bool is_recording() { return detail::t_recording; }

}  // namespace tc::profiler
