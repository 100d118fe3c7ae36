// safetensors writer and validating reader (format: see include/tensorcast/io/safetensors.h).
// Validation follows the Python library's: the offsets must tile the data section exactly
// (no holes, no overlaps, no trailing bytes) and each tensor's byte size must equal
// numel * dtype size. Every check happens before any tensor memory is allocated.
#include "tensorcast/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>

#include "core/tensor_impl.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "io/read_file.h"
#include "tensorcast/ops.h"

// Tensor bytes are copied as they sit in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace tc::io {

namespace {

// Larger headers are refused before reading them (the Python library's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeName {
  DType dtype;
  std::string_view name;
};
constexpr DTypeName kDTypeNames[] = {
    {kFloat32, "F32"},
    {kFloat16, "F16"},
    {kBFloat16, "BF16"},
    {kFloat64, "F64"},
    {kInt64, "I64"},
    {kInt32, "I32"},
    {kUInt8, "U8"},
    {kBool, "BOOL"},
    {kFloat8_e4m3fn, "F8_E4M3"},
    {kFloat8_e5m2, "F8_E5M2"},
    {kFloat8_e8m0fnu, "F8_E8M0"},
};

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypeNames)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

using Sink = std::function<void(const void*, size_t)>;

// Writes the whole file through `sink`. Data is ordered by element size (largest first),
// then name, as the Python library does, so every tensor starts aligned to its element size.
void write_safetensors(const StateDict& tensors, const Metadata& metadata, const Sink& sink) {
  std::vector<std::pair<std::string, Tensor>> items;
  items.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    TC_CHECK(t.defined(), "io", "cannot save tensor '", name, "': it is undefined");
    TC_CHECK(name != kMetadataKey, "io", "cannot save a tensor named '", name, "': the name is reserved");
    TC_CHECK(json::valid_utf8(name), "io", "cannot save a tensor whose name is not valid UTF-8");
    items.emplace_back(name, t.detach().to(Device{}).contiguous());
  }
  for (const auto& [k, v] : metadata)
    TC_CHECK(json::valid_utf8(k) && json::valid_utf8(v), "io", "metadata entry '", k, "' is not valid UTF-8");
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return element_size(a.second.dtype()) > element_size(b.second.dtype());
  });

  std::string header = "{";
  if (!metadata.empty()) {
    json::append_string(header, kMetadataKey);
    header += ":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      json::append_string(header, k);
      header += ':';
      json::append_string(header, v);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : items) {
    if (header.size() > 1) header += ',';
    json::append_string(header, name);
    header += ":{\"dtype\":\"";
    header += safetensors_dtype_name(t.dtype());
    header += "\",\"shape\":[";
    for (size_t i = 0; i < t.sizes().size(); ++i) {
      if (i) header += ',';
      header += std::to_string(t.sizes()[i]);
    }
    const uint64_t end = offset + t.nbytes();
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  sink(len, 8);
  sink(header.data(), header.size());
  for (const auto& [name, t] : items)
    if (t.nbytes() > 0) sink(t.raw_data(), t.nbytes());
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

template <class... Args>
[[noreturn]] void fail(std::string_view source, const Args&... what) {
  TC_FAIL("io", source, ": ", what...);
}

uint64_t read_index(const json::Value& v, std::string_view source, const std::string& name, const char* field) {
  if (v.kind != json::Value::Kind::Int)
    fail(source, "tensor '", name, "': ", field, " entries must be integers, not ", json::kind_name(v.kind));
  if (v.negative && v.magnitude != 0) fail(source, "tensor '", name, "': negative ", field, " entry -", v.magnitude);
  return v.magnitude;
}

Entry read_entry(const std::string& name, const json::Value& info, std::string_view source) {
  using Kind = json::Value::Kind;
  if (info.kind != Kind::Object)
    fail(source, "tensor '", name, "' is described by ", json::kind_name(info.kind), ", not an object");
  for (const auto& [k, v] : info.object)
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      fail(source, "tensor '", name, "' has an unknown field '", k, "'");
  const json::Value* dt = info.find("dtype");
  const json::Value* shape = info.find("shape");
  const json::Value* offsets = info.find("data_offsets");
  if (!dt || !shape || !offsets)
    fail(source, "tensor '", name, "' lacks ", !dt ? "dtype" : !shape ? "shape" : "data_offsets");
  if (dt->kind != Kind::String)
    fail(source, "tensor '", name, "': dtype is ", json::kind_name(dt->kind), ", not a string");
  const auto dtype = dtype_from_name(dt->string);
  if (!dtype)
    fail(source, "tensor '", name, "' has an unsupported dtype '", dt->string,
         "' (supported: F32 F16 BF16 F64 I64 I32 U8 BOOL)");
  if (shape->kind != Kind::Array)
    fail(source, "tensor '", name, "': shape is ", json::kind_name(shape->kind), ", not an array");
  if (offsets->kind != Kind::Array || offsets->array.size() != 2)
    fail(source, "tensor '", name, "': data_offsets must be an array [begin, end]");

  Entry e{name, *dtype, {}, 0, 0};
  // numel * element size may not exceed 2^63: anything larger cannot fit in any file.
  uint64_t bytes = element_size(*dtype);
  for (const auto& d : shape->array) {
    const uint64_t n = read_index(d, source, name, "shape");
    if (n > static_cast<uint64_t>(INT64_MAX) || (n != 0 && bytes > static_cast<uint64_t>(INT64_MAX) / n))
      fail(source, "tensor '", name, "': shape overflows (a dimension of ", n, ")");
    bytes *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  e.begin = read_index(offsets->array[0], source, name, "data_offsets");
  e.end = read_index(offsets->array[1], source, name, "data_offsets");
  if (e.begin > e.end)
    fail(source, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] end before they begin");
  if (e.end - e.begin != bytes)
    fail(source, "tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin, " bytes but ",
         dt->string, " ", shape_str(e.shape), " needs ", bytes);
  return e;
}

Metadata read_metadata(const json::Value& v, std::string_view source) {
  Metadata m;
  if (v.kind == json::Value::Kind::Null) return m;
  if (v.kind != json::Value::Kind::Object) fail(source, "__metadata__ is ", json::kind_name(v.kind), ", not an object");
  for (const auto& [k, val] : v.object) {
    if (val.kind != json::Value::Kind::String)
      fail(source, "__metadata__ entry '", k, "' is ", json::kind_name(val.kind), ", not a string");
    m.emplace(k, val.string);
  }
  return m;
}

// Owns a read-only mapping (or, for an empty file, nothing) of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    const int fd = open_regular_file(path.string(), "io", "pass a .safetensors file");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      TC_FAIL("io", "cannot read ", path.string(), ": ", std::strerror(err));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      const int err = errno;
      ::close(fd);
      if (p == MAP_FAILED) TC_FAIL("io", "cannot map ", path.string(), ": ", std::strerror(err));
      data_ = static_cast<const char*>(p);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {data_ ? data_ : "", size_}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

std::string_view safetensors_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  TC_FAIL("io", "dtype ", dtype_name(dtype), " has no safetensors name");
}

std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata) {
  std::string out;
  write_safetensors(tensors, metadata, [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

void save_safetensors(const std::filesystem::path& path, const StateDict& tensors, const Metadata& metadata) {
  AtomicFile file(path);
  write_safetensors(tensors, metadata, [&](const void* p, size_t n) { file.write(p, n); });
  file.commit();
}

SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view source) {
  if (bytes.size() < 8) fail(source, "file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (n > kMaxHeaderBytes)
    fail(source, "header length ", n, " is over the 100 MB limit (corrupt or not a safetensors file)");
  if (n > bytes.size() - 8)
    fail(source, "header length ", n, " runs past the end of the file (", bytes.size(), " bytes; truncated?)");
  const std::string_view header = bytes.substr(8, n);
  if (header.empty() || header[0] != '{') fail(source, "header does not start with '{' (not a safetensors file)");
  const json::Value root = json::parse(header, source);
  if (root.kind != json::Value::Kind::Object) fail(source, "header is ", json::kind_name(root.kind), ", not an object");

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, info] : root.object) {
    if (name == kMetadataKey)
      out.metadata = read_metadata(info, source);
    else
      entries.push_back(read_entry(name, info, source));
  }

  const std::string_view data = bytes.substr(8 + n);
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->end > data.size())
      fail(source, "tensor '", e->name, "': data_offsets [", e->begin, ", ", e->end, "] run past the data section (",
           data.size(), " bytes; truncated?)");
    if (e->begin < covered)
      fail(source, "tensors '", prev->name, "' and '", e->name, "' overlap (data_offsets end ", covered, " > begin ",
           e->begin, ")");
    if (e->begin > covered)
      fail(source, "data section has a hole: bytes [", covered, ", ", e->begin, ") belong to no tensor");
    covered = e->end;
    prev = e;
  }
  if (covered != data.size())
    fail(source, "data section has ", data.size() - covered, " trailing bytes that belong to no tensor");

  for (const auto& e : entries) {
    const char* src = data.data() + e.begin;
    if (e.dtype == kBool)
      for (uint64_t i = e.begin; i < e.end; ++i)
        if (static_cast<uint8_t>(data[i]) > 1)
          fail(source, "tensor '", e.name, "': BOOL byte ", int(uint8_t(data[i])), " is not 0 or 1");
    Tensor t = make_tensor(e.shape, e.dtype, Device{});
    if (e.end > e.begin) std::memcpy(t.raw_data(), src, e.end - e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  MappedFile file(path);
  return parse_safetensors(file.bytes(), path.string());
}

}  // namespace tc::io
