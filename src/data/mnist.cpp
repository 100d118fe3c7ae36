// IDX image datasets (MNIST, Fashion-MNIST): load, validate, normalize once to float32.
#include "tensorcast/data/mnist.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensorcast/data/idx.h"
#include "tensorcast/ops.h"

namespace tc::data {
namespace {

constexpr const char* kOp = "data";
constexpr const char* kFashionHint = "install Debian's dataset-fashion-mnist or pass --data DIR";

void check_readable(const std::string& path, const std::string& hint) {
  if (::access(path.c_str(), R_OK) != 0) TC_FAIL(kOp, "cannot open ", path, ": ", std::strerror(errno), "; ", hint);
}

// (N, H, W) uint8 -> (N, 1, H, W) float32 through a 256-entry table: one load per pixel,
// and every pixel value maps to exactly the float nearest (v/255 - mean)/std.
Tensor normalize_images(const Tensor& u8, double mean, double stddev) {
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>((v / 255.0 - mean) / stddev);
  Tensor out = empty({u8.size(0), 1, u8.size(1), u8.size(2)}, kFloat32);
  const uint8_t* in = u8.data_ptr<uint8_t>();
  float* o = out.data_ptr<float>();
  const int64_t n = u8.numel();
  for (int64_t i = 0; i < n; ++i) o[i] = lut[in[i]];
  return out;
}

int64_t max_label(const Tensor& labels) {  // int64 targets
  const int64_t* p = labels.data_ptr<int64_t>();
  int64_t m = 0;
  for (int64_t i = 0; i < labels.numel(); ++i) m = std::max(m, p[i]);
  return m;
}

std::string stem(bool train, const char* what) { return std::string(train ? "train" : "t10k") + what; }

}  // namespace

std::string find_idx_file(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz", raw = dir + "/" + stem;
  if (::access(gz.c_str(), F_OK) != 0 && ::access(raw.c_str(), F_OK) == 0) return raw;
  return gz;
}

IdxImageDataset::IdxImageDataset(const std::string& images_path, const std::string& labels_path, double mean,
                                 double stddev, const std::string& missing_hint)
    : mean_(mean), stddev_(stddev) {
  TC_CHECK(stddev > 0, kOp, "image normalization needs std > 0, got ", stddev);
  check_readable(images_path, missing_hint);
  check_readable(labels_path, missing_hint);
  const Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path);
  TC_CHECK(images.dtype() == kUInt8 && images.dim() == 3, kOp, images_path,
           " should hold uint8 images (N, H, W) but holds ", dtype_name(images.dtype()), " ", shape_str(images.sizes()),
           "; pass an images-idx3-ubyte file");
  TC_CHECK(labels.dtype() == kUInt8 && labels.dim() == 1, kOp, labels_path, " should hold uint8 labels (N) but holds ",
           dtype_name(labels.dtype()), " ", shape_str(labels.sizes()), "; pass a labels-idx1-ubyte file");
  TC_CHECK(images.size(0) == labels.size(0), kOp, images_path, " has ", images.size(0), " images but ", labels_path,
           " has ", labels.size(0), " labels; the two files do not belong together");
  set_tensors(normalize_images(images, mean, stddev), labels.to(kInt64));
}

FashionMNIST::FashionMNIST(const std::string& dir, bool train, double mean, double stddev)
    : IdxImageDataset(find_idx_file(dir, stem(train, "-images-idx3-ubyte")),
                      find_idx_file(dir, stem(train, "-labels-idx1-ubyte")), mean, stddev, kFashionHint) {
  const int64_t top = max_label(targets());
  TC_CHECK(top < 10, kOp, dir, " has labels up to ", top,
           " but Fashion-MNIST has 10 classes (0-9); the label file is corrupt or from another dataset");
}

MNIST::MNIST(const std::string& dir, bool train, double mean, double stddev)
    : IdxImageDataset(find_idx_file(dir, stem(train, "-images-idx3-ubyte")),
                      find_idx_file(dir, stem(train, "-labels-idx1-ubyte")), mean, stddev,
                      "pass the directory that holds MNIST's IDX files") {
  const int64_t top = max_label(targets());
  TC_CHECK(top < 10, kOp, dir, " has labels up to ", top,
           " but MNIST has 10 classes (0-9); the label file is corrupt or from another dataset");
}

}  // namespace tc::data
