// read_idx: the IDX reader (raw or gzip, via zlib), with validation of every header field
// before anything is allocated from it.
#include "tensorcast/data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "io/read_file.h"
#include "tensorcast/ops.h"

namespace tc::data {
namespace {

constexpr const char* kOp = "data";
constexpr int kMaxDims = 8;
// No IDX file of any real dataset comes near this; a header that claims more is corrupt.
constexpr uint64_t kMaxBytes = uint64_t{1} << 38;  // 256 GiB
constexpr unsigned kChunk = 1u << 24;              // bytes per gzread call

struct IdxType {
  uint8_t code;
  const char* name;
  size_t size;  // bytes per element in the file
  DType dtype;  // dtype of the tensor we return
};
constexpr IdxType kTypes[] = {
    {0x08, "uint8", 1, kUInt8}, {0x09, "int8", 1, kInt32},      {0x0B, "int16", 2, kInt32},
    {0x0C, "int32", 4, kInt32}, {0x0D, "float32", 4, kFloat32}, {0x0E, "float64", 8, kFloat64},
};

std::string human_bytes(uint64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// Owns the gzFile; every read goes through here so truncation and zlib errors are
// reported the same way.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    const int fd = io::open_regular_file(path, kOp, "pass the path of an IDX file");
    file_ = gzdopen(fd, "rb");
    if (!file_) {
      ::close(fd);
      TC_FAIL(kOp, "cannot open ", path, ": zlib could not allocate a reader");
    }
    gzbuffer(file_, 1u << 20);
  }
  ~GzReader() {
    if (file_) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  // A zlib error (corrupt gzip stream) throws.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(n - got, kChunk));
      const int r = gzread(file_, static_cast<char*>(dst) + got, want);
      if (r < 0) corrupt();
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    if (got < n) check_stream();  // distinguishes a clean end from a cut-off gzip stream
    return got;
  }

  [[noreturn]] void corrupt() {
    int code = 0;
    const char* msg = gzerror(file_, &code);
    TC_FAIL(kOp, path_, " is corrupt: zlib reports \"", (msg && *msg) ? msg : "unknown error",
            "\"; re-download or re-create the file");
  }

 private:
  void check_stream() {
    int code = 0;
    gzerror(file_, &code);
    // Z_BUF_ERROR at the end means the gzip stream stopped before its trailer.
    if (code != Z_OK && code != Z_STREAM_END) corrupt();
  }

  std::string path_;
  gzFile file_ = nullptr;
};

[[noreturn]] void truncated(const std::string& path, const char* part, uint64_t want, uint64_t got) {
  TC_FAIL(kOp, path, " is truncated: its ", part, " needs ", want, " bytes but only ", got,
          " were found; re-download or re-create the file");
}

uint32_t load_be32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// Converts `n` big-endian elements of `type` at `src` into the tensor's dtype at `dst`.
void convert(const IdxType& type, const unsigned char* src, void* dst, size_t n) {
  if (n == 0) return;  // an empty tensor has no storage: dst may be null
  switch (type.code) {
    case 0x08:
      std::memcpy(dst, src, n);
      break;
    case 0x09: {
      auto* out = static_cast<int32_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(src[i]);
      break;
    }
    case 0x0B: {
      auto* out = static_cast<int32_t*>(dst);
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        out[i] = static_cast<int16_t>(__builtin_bswap16(v));
      }
      break;
    }
    case 0x0C:
    case 0x0D: {  // same bits, swapped: int32 and float32 share the loop
      auto* out = static_cast<uint32_t*>(dst);
      for (size_t i = 0; i < n; ++i) {
        uint32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        out[i] = __builtin_bswap32(v);
      }
      break;
    }
    case 0x0E: {
      auto* out = static_cast<uint64_t*>(dst);
      for (size_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, src + 8 * i, 8);
        out[i] = __builtin_bswap64(v);
      }
      break;
    }
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzReader in(path);
  unsigned char magic[4];
  const size_t got_magic = in.read(magic, 4);
  if (got_magic == 0)
    TC_FAIL(kOp, path, " is empty; an IDX file starts with a 4-byte magic number; re-download or re-create the file");
  if (got_magic < 4) truncated(path, "magic number", 4, got_magic);

  const IdxType* type = nullptr;
  for (const auto& t : kTypes)
    if (t.code == magic[2]) type = &t;
  if (magic[0] != 0 || magic[1] != 0 || !type) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", magic[0], magic[1], magic[2], magic[3]);
    TC_FAIL(kOp, path, " is not an IDX file: it starts with bytes ", hex,
            " but an IDX file starts with 00 00 <type 08/09/0b/0c/0d/0e> <ndim>; check the path");
  }
  const int ndim = magic[3];
  if (ndim < 1 || ndim > kMaxDims)
    TC_FAIL(kOp, path, " has an IDX header with ", ndim, " dimensions; supported are 1 to ", kMaxDims,
            " (the file is corrupt or not an IDX file)");

  unsigned char dims_raw[4 * kMaxDims];
  const size_t dims_bytes = 4 * static_cast<size_t>(ndim);
  const size_t got_dims = in.read(dims_raw, dims_bytes);
  if (got_dims < dims_bytes) truncated(path, "header", 4 + dims_bytes, 4 + got_dims);

  Shape shape(ndim);
  uint64_t numel = 1;
  bool overflow = false;
  for (int i = 0; i < ndim; ++i) {
    const uint32_t d = load_be32(dims_raw + 4 * i);
    shape[i] = d;
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d)
      overflow = true;
    else
      numel *= d;
  }
  if (overflow || numel > kMaxBytes / type->size)
    TC_FAIL(kOp, path, " has an IDX header claiming shape ", shape_str(shape), " of ", type->name,
            overflow ? " (more elements than fit in 64 bits)" : (", " + human_bytes(numel * type->size)).c_str(),
            ", which is not a plausible dataset; the file is corrupt");
  const uint64_t data_bytes = numel * type->size;

  // Read into a buffer that grows with what actually arrives, so a corrupt header that
  // claims gigabytes costs only the bytes the file really holds.
  std::vector<unsigned char> buf;
  buf.reserve(static_cast<size_t>(std::min<uint64_t>(data_bytes, uint64_t{64} << 20)));
  while (buf.size() < data_bytes) {
    const size_t old = buf.size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(data_bytes - old, std::max<size_t>(old, 1u << 20)));
    buf.resize(old + want);
    const size_t got = in.read(buf.data() + old, want);
    if (got < want) truncated(path, ("data for shape " + shape_str(shape)).c_str(), data_bytes, old + got);
  }
  unsigned char extra;
  if (in.read(&extra, 1) != 0)
    TC_FAIL(kOp, path, " has bytes after the ", human_bytes(data_bytes), " of data its header ", shape_str(shape),
            " describes (trailing garbage, or a wrong header); re-download or re-create the file");

  Tensor out = empty(shape, type->dtype);
  convert(*type, buf.data(), out.raw_data(), static_cast<size_t>(numel));
  return out;
}

}  // namespace tc::data
