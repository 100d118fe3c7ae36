// Internal: how the library reports records to tc::profiler (include/tensorcast/profiler.h).
//
//   profiler::detail::Scope rec("mm");          // one record from here to the end of scope
//
// The flag is the only thing read when no Profile is recording.
#pragma once
#include <string_view>

#include "core/tls.h"

namespace tc::profiler::detail {

extern thread_local constinit bool t_recording TC_TLS_FAST;

void enter(std::string_view name, std::string_view suffix);
void exit();

class Scope {
 public:
  explicit Scope(std::string_view name, std::string_view suffix = {}) : active_(t_recording) {
    if (active_) [[unlikely]]
      enter(name, suffix);
  }
  ~Scope() {
    if (active_) [[unlikely]]
      exit();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_;
};

}  // namespace tc::profiler::detail
