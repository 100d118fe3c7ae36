/// \file
/// Image classification datasets in the MNIST family's IDX format: images (N, H, W) uint8
/// and labels (N) uint8, loaded into float32 images (N, 1, H, W) normalized as
/// (pixel / 255 - mean) / stddev and int64 targets (N). Batches are row memcpys.
#pragma once
#include <array>
#include <string>
#include <string_view>

#include "tensorcast/data/dataset.h"

namespace tc::data {

/// Any pair of IDX image/label files. `missing_hint` is appended to the "cannot open"
/// error to tell the user what to do (e.g. which package installs the files).
class IdxImageDataset : public TensorDataset {
 public:
  /// Reads an IDX image file and its labels, normalizing pixels to (x / 255 - mean) / stddev; missing_hint ends the
  /// error for a missing file.
  IdxImageDataset(const std::string& images_path, const std::string& labels_path, double mean, double stddev,
                  const std::string& missing_hint = "check the path");
  const Tensor& images() const noexcept { return data(); }  ///< float32 (N, 1, H, W), normalized
  /// The mean subtracted.
  double mean() const noexcept { return mean_; }
  /// The standard deviation divided by.
  double stddev() const noexcept { return stddev_; }

 private:
  double mean_ = 0, stddev_ = 1;
};

/// Fashion-MNIST (Zalando): 60000 train / 10000 test 28x28 images of 10 clothing classes.
/// Reads `<dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte`, with or without ".gz".
class FashionMNIST : public IdxImageDataset {
 public:
  static constexpr double kMean = 0.2860;  ///< of the train pixels / 255
  static constexpr double kStd = 0.3530;   ///< of the train pixels / 255
  static constexpr std::string_view kDefaultDir =
      "/usr/share/datasets/fashion-mnist";  ///< Debian dataset-fashion-mnist
  /// The names of the 10 classes, by label.
  static constexpr std::array<std::string_view, 10> kClasses = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

  /// The train (60,000) or test (10,000) split from `dir`.
  explicit FashionMNIST(const std::string& dir = std::string(kDefaultDir), bool train = true, double mean = kMean,
                        double stddev = kStd);
};

/// MNIST digits, same layout and file names as Fashion-MNIST.
class MNIST : public IdxImageDataset {
 public:
  static constexpr double kMean = 0.1307;  ///< of the train pixels / 255
  static constexpr double kStd = 0.3081;   ///< of the train pixels / 255
  /// The train (60,000) or test (10,000) split from `dir`.
  explicit MNIST(const std::string& dir, bool train = true, double mean = kMean, double stddev = kStd);
};

/// The path of `<dir>/<stem>.gz` or, when only the raw file exists, `<dir>/<stem>`.
/// When neither exists returns the ".gz" path (so the error names what was expected).
std::string find_idx_file(const std::string& dir, const std::string& stem);

}  // namespace tc::data
