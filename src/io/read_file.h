// Opening files that come from outside (datasets, checkpoints, anything a user names).
#pragma once
#include <string>

namespace tc::io {

// Opens `path` read-only and returns the descriptor (the caller closes it). Refuses what is
// not a regular file with a tc::Error "[op] cannot read PATH: it is a directory / FIFO /
// device; HINT" — without blocking: opening a FIFO for reading would wait for a writer
// forever, so the open is non-blocking and the flag is cleared once the file is known.
int open_regular_file(const std::string& path, const char* op, const std::string& hint);

}  // namespace tc::io
