// IDX files (src/data/idx.cpp), raw and gzip-compressed: the input is written to a file
// and read with read_idx, which takes either (zlib reads both), so gzip inputs in the
// corpus fuzz the gzip framing. An input that is not gzip is also compressed and read
// again: both reads must agree (the same tensor, or both refused).
#include <tensorcast/data/idx.h>
#include <zlib.h>

#include <cstring>
#include <optional>
#include <string>

#include "fuzz_util.h"

namespace {

std::string gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, size) + 32, '\0');
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::optional<tc::Tensor> read(const std::string& path) {
  try {
    return tc::data::read_idx(path);
  } catch (const tc::Error&) {
    return std::nullopt;
  } catch (...) {
    fuzz::escaped();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto raw = read(fuzz::write_scratch("idx", data, size));
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;
  const std::string z = gzip(data, size);
  const auto unzipped = read(fuzz::write_scratch("idx.gz", z.data(), z.size()));
  if (raw.has_value() != unzipped.has_value()) fuzz::broken("raw and gzip reads disagree on refusing");
  if (raw && (raw->dtype() != unzipped->dtype() || raw->sizes() != unzipped->sizes() ||
              (raw->nbytes() && std::memcmp(raw->raw_data(), unzipped->raw_data(), raw->nbytes()) != 0)))
    fuzz::broken("raw and gzip reads return different tensors");
  return 0;
}
