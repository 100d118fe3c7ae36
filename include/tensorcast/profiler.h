/// \file
/// A per-op profiler for the calling thread: torch.profiler's key_averages() for tensorcast.
///
/// \code{.cpp}
///   tc::profiler::Profile prof;            // records from here ...
///   train_step();
///   prof.stop();                           // ... to here (or the destructor)
///   std::cout << prof.table();             // ops by self time: calls, self/total ms, MiB allocated
/// \endcode
///
/// Every public op (the dispatcher of ops.h), every backward formula ("<op> backward"), casts
/// (Tensor::to), the optimizer step, the GradScaler's unscale, and any RecordFunction scope
/// is a record. Records nest: an op's total time includes the ops it calls, its self time
/// does not. Bytes are what the op's tensors allocated (the CPU allocator's counter), self.
/// Only the thread that created the Profile is recorded; intra-op worker threads are inside
/// the op that started them. Off (no Profile alive) the cost is one thread-local test per op.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tc::profiler {

/// Totals of one record name over the profiled span.
struct OpStat {
  std::string name;              ///< the record's name (an op's, or a RecordFunction's)
  int64_t calls = 0;             ///< times it was entered
  double total_ms = 0;           ///< wall time from entry to exit, nested records included
  double self_ms = 0;            ///< total minus the nested records' totals
  int64_t self_alloc_bytes = 0;  ///< bytes of tensor storage allocated by this record, not its children
};

/// Records ops and RecordFunction scopes on this thread from construction to stop().
class Profile {
 public:
  Profile();   ///< starts recording on this thread; profiles do not nest (throws if one is active)
  ~Profile();  ///< stops if still recording
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Stops recording (stats stay readable).
  void stop();
  double wall_ms() const;                    ///< start to stop (or to now)
  std::vector<OpStat> key_averages() const;  ///< sorted by self time, largest first
  /// A text table of key_averages(): the `top` largest by self time, then a line for the
  /// time spent outside any record (graph bookkeeping, user code). Times divided by `per`
  /// (e.g. the number of steps profiled) when > 1.
  std::string table(int top = 30, int64_t per = 1) const;

  struct State;  // internal (src/profiler/profiler.cpp)

 private:
  State* state_;
};

/// Marks a user region as a record (torch.profiler.record_function). `name` must outlive
/// the Profile (a string literal). No-op when no Profile is recording on this thread.
class RecordFunction {
 public:
  /// Records a scope named `name` until destroyed (while a Profile is active).
  explicit RecordFunction(const char* name);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  bool active_;
};

bool is_recording();  ///< a Profile is recording on this thread

}  // namespace tc::profiler
