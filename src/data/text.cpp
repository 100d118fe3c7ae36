// TextDataset: byte-level windows of a file for language modelling.
#include "tensorcast/data/text.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "io/read_file.h"
#include "tensorcast/ops.h"

namespace tc::data {
namespace {

constexpr const char* kOp = "data";

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Widens window [s, s + t) of the bytes into int64 tokens.
void widen(const uint8_t* src, int64_t* dst, int64_t t) {
  for (int64_t j = 0; j < t; ++j) dst[j] = src[j];
}

}  // namespace

Tensor read_bytes(const std::string& path) {
  const int fd = io::open_regular_file(path, kOp, "check the path of the text file");
  std::unique_ptr<std::FILE, FileCloser> f(::fdopen(fd, "rb"));
  if (!f) {
    ::close(fd);
    TC_FAIL(kOp, "cannot open ", path, ": ", std::strerror(errno));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, n);
  if (std::ferror(f.get()))
    TC_FAIL(kOp, "cannot read ", path, ": ", std::strerror(errno), "; pass a readable regular file");
  Tensor out = empty({static_cast<int64_t>(bytes.size())}, kUInt8);
  if (!bytes.empty()) std::memcpy(out.raw_data(), bytes.data(), bytes.size());
  return out;
}

TextDataset::TextDataset(const std::string& path, int64_t context, std::optional<int64_t> stride)
    : bytes_(read_bytes(path)) {
  init(context, stride, path);
}

TextDataset::TextDataset(Tensor bytes, int64_t context, std::optional<int64_t> stride) {
  TC_CHECK(bytes.defined() && bytes.dtype() == kUInt8 && bytes.dim() == 1, kOp,
           "TextDataset needs a 1-d uint8 tensor of bytes, got ",
           bytes.defined() ? std::string(dtype_name(bytes.dtype())) + " " + shape_str(bytes.sizes())
                           : "an undefined tensor");
  bytes_ = bytes.detach().to(Device(kCPU)).contiguous();  // read on the host by get/get_batch
  init(context, stride, "the text");
}

void TextDataset::init(int64_t context, std::optional<int64_t> stride, const std::string& what) {
  TC_CHECK(context >= 1, kOp, "TextDataset context must be at least 1, got ", context);
  stride_ = stride.value_or(context);
  TC_CHECK(stride_ >= 1, kOp, "TextDataset stride must be at least 1, got ", stride_);
  context_ = context;
  const int64_t n = bytes_.numel();
  // A window needs context + 1 bytes: context inputs and the byte after each as target.
  TC_CHECK(n >= context + 1, kOp, what, " has ", n, " bytes but a context of ", context, " needs at least ",
           context + 1, "; use a longer text or a smaller context");
  size_ = (n - 1 - context) / stride_ + 1;
}

int64_t TextDataset::size() const { return size_; }

Example TextDataset::get(int64_t index) const {
  check_index(index, size_);
  Tensor x = empty({context_}, kInt64), y = empty({context_}, kInt64);
  const uint8_t* s = bytes_.data_ptr<uint8_t>() + index * stride_;
  widen(s, x.data_ptr<int64_t>(), context_);
  widen(s + 1, y.data_ptr<int64_t>(), context_);
  return {x, y};
}

Example TextDataset::get_batch(std::span<const int64_t> indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  Tensor x = empty({b, context_}, kInt64), y = empty({b, context_}, kInt64);
  const uint8_t* base = bytes_.data_ptr<uint8_t>();
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    check_index(indices[i], size_);
    const uint8_t* s = base + indices[i] * stride_;
    widen(s, xp + i * context_, context_);
    widen(s + 1, yp + i * context_, context_);
  }
  return {x, y};
}

}  // namespace tc::data
