// Data: the IDX reader (round trips for every element type, a corpus of corrupt files),
// Fashion-MNIST on the real files, TensorDataset/TextDataset, and the DataLoader
// (batching, seeded shuffling, exact resume, prefetch thread, errors, early shutdown).
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "common/testing.h"

namespace fs = std::filesystem;
using namespace tc;
using tc::testing::throws_with;

namespace {

const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";

// A fresh directory per test process for the files the tests write, removed at exit.
const fs::path& tmp_dir() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("tc_test_data_" + std::to_string(::getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}
std::string tmp(const std::string& name) { return (tmp_dir() / name).string(); }

void write_bytes(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    if (!bytes.empty()) ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), int(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

// An IDX file from the spec: magic 00 00 type ndim, big-endian uint32 dims, big-endian data.
std::string idx_header(uint8_t type, const std::vector<uint32_t>& dims) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int b = 3; b >= 0; --b) s.push_back(static_cast<char>((d >> (8 * b)) & 0xFF));
  return s;
}
template <class T>
std::string big_endian(const std::vector<T>& values) {
  std::string s;
  for (T v : values) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) s.push_back(static_cast<char>(b[sizeof(T) - 1 - i]));
  }
  return s;
}

std::vector<double> values_of(const Tensor& t) { return t.to_vector(); }

}  // namespace

// ------------------------------------------------------------------------- IDX reader

template <class T>
void round_trip(uint8_t code, const std::vector<T>& values, DType expected) {
  const std::vector<uint32_t> dims = {2, static_cast<uint32_t>(values.size() / 2)};
  for (bool gzip : {false, true}) {
    const std::string path = tmp("rt_" + std::to_string(code) + (gzip ? ".gz" : ".raw"));
    write_bytes(path, idx_header(code, dims) + big_endian(values), gzip);
    const Tensor t = data::read_idx(path);
    EXPECT_EQ(t.dtype(), expected) << "type " << int(code);
    EXPECT_EQ(t.sizes(), (Shape{2, int64_t(values.size() / 2)}));
    EXPECT_TRUE(t.is_contiguous());
    const auto got = values_of(t);
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(got[i], static_cast<double>(values[i])) << "type " << int(code) << " gzip " << gzip << " i " << i;
  }
}

TEST(Idx, RoundTripEveryElementType) {
  round_trip<uint8_t>(0x08, {0, 1, 127, 128, 254, 255}, kUInt8);
  round_trip<int8_t>(0x09, {-128, -1, 0, 1, 100, 127}, kInt32);
  round_trip<int16_t>(0x0B, {-32768, -257, -1, 0, 258, 32767}, kInt32);
  round_trip<int32_t>(0x0C, {INT32_MIN, -65536, -1, 0, 16777217, INT32_MAX}, kInt32);
  round_trip<float>(0x0D, {-1.5f, 0.f, 1e-30f, 3.25f, 1e30f, -0.f}, kFloat32);
  round_trip<double>(0x0E, {-1.5, 0.1, 1e-300, 3.25, 1e300, 123456789.125}, kFloat64);
}

TEST(Idx, ThreeDimsAndEmptyDim) {
  std::vector<uint8_t> v(24);
  for (int i = 0; i < 24; ++i) v[i] = uint8_t(i * 7);
  write_bytes(tmp("3d.gz"), idx_header(0x08, {2, 3, 4}) + big_endian(v), true);
  const Tensor t = data::read_idx(tmp("3d.gz"));
  ASSERT_EQ(t.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.data_ptr<uint8_t>()[23], uint8_t(23 * 7));
  write_bytes(tmp("zero"), idx_header(0x08, {0, 28, 28}), false);
  EXPECT_EQ(data::read_idx(tmp("zero")).sizes(), (Shape{0, 28, 28}));
}

TEST(Idx, MissingFileSaysWhatToDo) {
  EXPECT_TRUE(throws_with([] { data::read_idx("/nonexistent/x-idx3-ubyte.gz"); },
                          {"[data] cannot open /nonexistent/x-idx3-ubyte.gz: No such file or directory"}));
  EXPECT_TRUE(throws_with([] { data::read_idx(tmp_dir().string()); }, {"[data]", "is a directory"}));
  EXPECT_TRUE(throws_with([] { data::FashionMNIST("/x"); },
                          {"[data] cannot open /x/train-images-idx3-ubyte.gz: No such file or directory; install "
                           "Debian's dataset-fashion-mnist or pass --data DIR"}));
}

TEST(Idx, CorruptCorpusGivesCleanErrors) {
  std::vector<uint8_t> img(2 * 28 * 28, 7);
  const std::string good = idx_header(0x08, {2, 28, 28}) + big_endian(img);
  std::string garbage_gzip = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03";
  for (int i = 0; i < 300; ++i) garbage_gzip.push_back(static_cast<char>((i * 131 + 17) & 0xFF));
  struct Case {
    std::string name, bytes;
    bool gzip;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> corpus = {
      {"empty", "", false, {"is empty"}},
      {"empty_gz", "", true, {"is empty"}},
      {"short_magic", std::string("\0\0", 2), false, {"is truncated", "magic"}},
      {"text", "hello, world: not an idx file", false, {"is not an IDX file", "68 65 6c 6c"}},
      {"bad_type", idx_header(0x07, {1}) + "x", false, {"is not an IDX file", "00 00 07 01"}},
      {"zero_dims", idx_header(0x08, {}), false, {"0 dimensions"}},
      {"many_dims", std::string("\0\0\x08\x20", 4), false, {"32 dimensions"}},
      {"short_header",
       idx_header(0x08, {2, 28, 28}).substr(0, 9),
       true,
       {"is truncated", "header needs 16 bytes", "only 9"}},
      {"short_data",
       good.substr(0, good.size() - 100),
       false,
       {"is truncated", "(2, 28, 28)", "1568 bytes", "only 1468"}},
      {"short_data_gz", good.substr(0, good.size() - 100), true, {"is truncated", "only 1468"}},
      {"overflow_dims",
       idx_header(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}),
       false,
       {"more elements than fit in 64 bits", "corrupt"}},
      {"absurd_size", idx_header(0x08, {60000, 60000, 60000}), true, {"not a plausible dataset", "196.5 TiB"}},
      // Plausible by size but far larger than the file: must fail on the data actually read.
      {"claims_4gib",
       idx_header(0x08, {65536, 256, 256}) + "abc",
       false,
       {"is truncated", "4294967296 bytes", "only 3"}},
      {"trailing", good + "junk", false, {"has bytes after", "trailing garbage"}},
      {"trailing_gz", good + "junk", true, {"has bytes after"}},
      {"garbage_gzip", garbage_gzip, false, {"is corrupt: zlib reports"}},
  };
  for (const auto& c : corpus) {
    const std::string path = tmp("corrupt_" + c.name);
    write_bytes(path, c.bytes, c.gzip);
    try {
      data::read_idx(path);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("[data] " + path, 0), 0u) << c.name << ": " << msg;
      for (const auto& f : c.fragments)
        EXPECT_NE(msg.find(f), std::string::npos) << c.name << ": \"" << msg << "\" lacks \"" << f << "\"";
    }
  }
  // A gzip stream cut off in the middle (a partial download).
  write_bytes(tmp("whole.gz"), good, true);
  std::ifstream in(tmp("whole.gz"), std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), {});
  write_bytes(tmp("cut.gz"), gz.substr(0, gz.size() / 2), false);
  EXPECT_TRUE(throws_with([] { data::read_idx(tmp("cut.gz")); }, {"[data]", "cut.gz"}));
  // Every prefix of a valid gzip file fails cleanly (never crashes, never succeeds).
  for (size_t n = 0; n + 8 < gz.size(); n += 3) {
    write_bytes(tmp("prefix.gz"), gz.substr(0, n), false);
    EXPECT_THROW(data::read_idx(tmp("prefix.gz")), Error) << "prefix " << n;
  }
}

// ------------------------------------------------------------------------- Fashion-MNIST

TEST(FashionMNIST, RealFiles) {
  if (!fs::exists(kFashionDir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << kFashionDir << " (install Debian's dataset-fashion-mnist)";
  // Raw pixels: the known statistics of the train set.
  const Tensor raw = data::read_idx(kFashionDir + "/train-images-idx3-ubyte.gz");
  ASSERT_EQ(raw.sizes(), (Shape{60000, 28, 28}));
  ASSERT_EQ(raw.dtype(), kUInt8);
  double s = 0, s2 = 0;
  const uint8_t* p = raw.data_ptr<uint8_t>();
  for (int64_t i = 0; i < raw.numel(); ++i) {
    const double v = p[i] / 255.0;
    s += v;
    s2 += v * v;
  }
  const double mean = s / raw.numel(), stddev = std::sqrt(s2 / raw.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.2860, 5e-4);
  EXPECT_NEAR(stddev, 0.3530, 5e-4);

  const data::FashionMNIST train(kFashionDir, true), test(kFashionDir, false);
  ASSERT_EQ(train.size(), 60000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.images().sizes(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.images().dtype(), kFloat32);
  EXPECT_EQ(train.targets().sizes(), (Shape{60000}));
  EXPECT_EQ(train.targets().dtype(), kInt64);
  EXPECT_EQ(test.images().sizes(), (Shape{10000, 1, 28, 28}));
  for (const auto* ds : {&train, &test}) {
    std::vector<int64_t> count(10, 0);
    const int64_t* t = ds->targets().data_ptr<int64_t>();
    for (int64_t i = 0; i < ds->size(); ++i) {
      ASSERT_GE(t[i], 0);
      ASSERT_LT(t[i], 10);
      ++count[t[i]];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(count[c], ds->size() / 10) << "class " << c;
  }
  // Normalized with the defaults: mean ~0, std ~1 over the train set.
  const double nm = train.images().mean().item<double>();
  const double nsd = std::sqrt(train.images().pow(2.0).mean().item<double>() - nm * nm);
  EXPECT_NEAR(nm, 0.0, 2e-3);
  EXPECT_NEAR(nsd, 1.0, 2e-3);
  // A pixel maps exactly: (v/255 - mean)/std rounded once to float.
  EXPECT_EQ(train.images().data_ptr<float>()[100], static_cast<float>((p[100] / 255.0 - 0.2860) / 0.3530));

  // Gather speed: a batch of 128 images with targets (memcpy per row).
  std::vector<int64_t> idx(128);
  for (int i = 0; i < 128; ++i) idx[i] = (i * 7919) % 60000;
  std::vector<double> us;
  for (int r = 0; r < 200; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const data::Example b = train.get_batch(idx);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(b.data.sizes(), (Shape{128, 1, 28, 28}));
  }
  std::sort(us.begin(), us.end());
  std::printf("[ measure  ] Fashion-MNIST get_batch(128): median %.1f us, p90 %.1f us\n", us[100], us[180]);
#if !defined(__SANITIZE_THREAD__)  // TSan checks every byte memcpy moves: ~15x slower, not a speed regression
  EXPECT_LT(us[100], 1000.0);
#endif
  const data::Example b = train.get_batch(idx);
  EXPECT_EQ(std::memcmp(b.data.data_ptr<float>() + 5 * 784, train.images().data_ptr<float>() + idx[5] * 784, 784 * 4),
            0);
  EXPECT_EQ(b.target.data_ptr<int64_t>()[5], train.targets().data_ptr<int64_t>()[idx[5]]);

  // A whole epoch through the loader with prefetch.
  data::DataLoader loader(train, data::DataLoaderOptions().batch_size(128).shuffle(true));
  const auto t0 = std::chrono::steady_clock::now();
  int64_t seen = 0;
  for (auto& batch : loader) seen += batch.target.size(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(seen, 60000);
  std::printf("[ measure  ] DataLoader epoch of Fashion-MNIST (469 batches of 128, prefetch 2): %.1f ms\n", secs * 1e3);
}

// ------------------------------------------------------------------------- datasets

TEST(TensorDataset, GetAndBatch) {
  const Tensor x = arange(0.0, 24.0, 1.0, kFloat32).reshape({6, 2, 2});
  const Tensor y = arange(0.0, 6.0, 1.0, kInt64);
  data::TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 6);
  const data::Example e = ds.get(4);
  EXPECT_EQ(values_of(e.data), (std::vector<double>{16, 17, 18, 19}));
  EXPECT_EQ(e.target.item<int64_t>(), 4);
  const std::vector<int64_t> idx = {5, 0, 5};
  const data::Example b = ds.get_batch(idx);
  EXPECT_EQ(b.data.sizes(), (Shape{3, 2, 2}));
  EXPECT_EQ(values_of(b.target), (std::vector<double>{5, 0, 5}));
  EXPECT_EQ(values_of(b.data)[4], 0.0);
  EXPECT_TRUE(throws_with([&] { ds.get(6); }, {"[data] index 6 is out of range for a dataset of 6 examples"}));
  const std::vector<int64_t> bad = {1, -1};
  EXPECT_TRUE(throws_with([&] { ds.get_batch(bad); }, {"[data] index -1 is out of range"}));
  EXPECT_TRUE(throws_with([&] { data::TensorDataset(x, arange(5.0)); }, {"[data]", "6 data rows", "5 targets"}));
}

TEST(TextDataset, Windows) {
  const std::string text = "abcdefghij";
  write_bytes(tmp("text.txt"), text, false);
  data::TextDataset strided(tmp("text.txt"), 3);  // default: non-overlapping windows
  EXPECT_EQ(strided.size(), 3);                   // starts 0, 3, 6 (6+3+1 = 10 bytes)
  for (int64_t i = 0; i < strided.size(); ++i) {
    const data::Example e = strided.get(i);
    EXPECT_EQ(e.data.dtype(), kInt64);
    EXPECT_EQ(e.data.sizes(), (Shape{3}));
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(e.data.data_ptr<int64_t>()[j], text[3 * i + j]);
      EXPECT_EQ(e.target.data_ptr<int64_t>()[j], text[3 * i + j + 1]);
    }
  }
  data::TextDataset every(tmp("text.txt"), 3, 1);  // every offset
  EXPECT_EQ(every.size(), 7);
  const std::vector<int64_t> idx = {6, 0};
  const data::Example b = every.get_batch(idx);
  EXPECT_EQ(b.data.sizes(), (Shape{2, 3}));
  EXPECT_EQ(values_of(b.data), (std::vector<double>{'g', 'h', 'i', 'a', 'b', 'c'}));
  EXPECT_EQ(values_of(b.target), (std::vector<double>{'h', 'i', 'j', 'b', 'c', 'd'}));
  // Bytes >= 128 are tokens 128..255, not negative.
  write_bytes(tmp("high.bin"), "\xff\x80\x01", false);
  EXPECT_EQ(values_of(data::TextDataset(tmp("high.bin"), 2).get(0).data), (std::vector<double>{255, 128}));
  EXPECT_TRUE(throws_with([] { data::TextDataset(tmp("text.txt"), 10); },
                          {"[data]", "has 10 bytes but a context of 10 needs at least 11"}));
  EXPECT_EQ(data::TextDataset(tmp("text.txt"), 9).size(), 1);
  EXPECT_TRUE(throws_with([] { data::TextDataset("/nonexistent.txt", 4); }, {"[data] cannot open /nonexistent.txt"}));
  // Through a loader: (B, T) int64 batches.
  data::DataLoader loader(every, data::DataLoaderOptions().batch_size(4));
  std::vector<Shape> shapes;
  for (auto& batch : loader) shapes.push_back(batch.data.sizes());
  EXPECT_EQ(shapes, (std::vector<Shape>{{4, 3}, {3, 3}}));
}

// ------------------------------------------------------------------------- DataLoader

namespace {

// Example i = (i as a (1,) float row, i as int64 target): batches reveal their indices.
data::TensorDataset index_dataset(int64_t n) {
  return data::TensorDataset(arange(0.0, double(n), 1.0, kFloat32).reshape({n, 1}),
                             arange(0.0, double(n), 1.0, kInt64));
}

std::vector<int64_t> ids(const data::Example& b) {
  const int64_t* p = b.target.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + b.target.numel());
}

// Runs `epochs` full passes, returning each batch's indices.
std::vector<std::vector<int64_t>> run(data::DataLoader& loader, int epochs) {
  std::vector<std::vector<int64_t>> out;
  for (int e = 0; e < epochs; ++e)
    for (auto& b : loader) out.push_back(ids(b));
  return out;
}

// Throws from get_batch for a batch that contains `bad`.
class Faulty : public data::Dataset {
 public:
  explicit Faulty(int64_t bad) : bad_(bad) {}
  int64_t size() const override { return 100; }
  data::Example get(int64_t i) const override {
    TC_CHECK(i != bad_, "data", "example ", i, " is unreadable");
    return {full({2}, double(i)), scalar_tensor(double(i), kInt64)};
  }

 private:
  int64_t bad_;
};

// Slow batches, so the worker is busy or blocked when the loader goes away.
class Slow : public data::Dataset {
 public:
  int64_t size() const override { return 64; }
  data::Example get(int64_t i) const override { return {full({3}, double(i)), scalar_tensor(double(i), kInt64)}; }
  data::Example get_batch(std::span<const int64_t> idx) const override {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return Dataset::get_batch(idx);
  }
};

}  // namespace

TEST(DataLoader, SizesAndDropLast) {
  data::DataLoader keep(index_dataset(10), data::DataLoaderOptions().batch_size(3));
  EXPECT_EQ(keep.size(), 4);
  auto batches = run(keep, 1);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[3], (std::vector<int64_t>{9}));
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2}));  // no shuffle: in order
  data::DataLoader drop(index_dataset(10), data::DataLoaderOptions().batch_size(3).drop_last(true));
  EXPECT_EQ(drop.size(), 3);
  EXPECT_EQ(run(drop, 1).size(), 3u);
  data::DataLoader exact(index_dataset(9), data::DataLoaderOptions().batch_size(3).drop_last(true));
  EXPECT_EQ(run(exact, 1).size(), 3u);
  data::DataLoader big(index_dataset(5), data::DataLoaderOptions().batch_size(8).drop_last(true));
  EXPECT_EQ(run(big, 2).size(), 0u);
  // Batch tensors: data (B, 1) float32, target (B) int64.
  data::DataLoader l(index_dataset(10), data::DataLoaderOptions(4));
  auto it = l.begin();
  EXPECT_EQ(it->data.sizes(), (Shape{4, 1}));
  EXPECT_EQ(it->target.sizes(), (Shape{4}));
  EXPECT_TRUE(throws_with([] { data::DataLoader(index_dataset(3), data::DataLoaderOptions(0)); },
                          {"[data]", "batch_size must be at least 1"}));
}

TEST(DataLoader, ShuffleEveryIndexOncePerEpochSeededAndVaryingByEpoch) {
  const int64_t n = 1000;
  data::DataLoader a(index_dataset(n), data::DataLoaderOptions().batch_size(64).shuffle(true).seed(5));
  std::vector<std::vector<int64_t>> orders;
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(a.epoch(), e);
    std::vector<int64_t> order;
    for (auto& b : a) {
      const auto v = ids(b);
      order.insert(order.end(), v.begin(), v.end());
    }
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i) << "epoch " << e;
    EXPECT_EQ(order, a.epoch_order(e));
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  // Same seed: same sequence; another seed: another.
  data::DataLoader b(index_dataset(n), data::DataLoaderOptions().batch_size(64).shuffle(true).seed(5));
  data::DataLoader c(index_dataset(n), data::DataLoaderOptions().batch_size(64).shuffle(true).seed(6));
  const auto rb = run(b, 3), rc = run(c, 3);
  std::vector<int64_t> flat_b;
  for (auto& v : rb) flat_b.insert(flat_b.end(), v.begin(), v.end());
  std::vector<int64_t> flat_a;
  for (auto& o : orders) flat_a.insert(flat_a.end(), o.begin(), o.end());
  EXPECT_EQ(flat_a, flat_b);
  EXPECT_NE(rb, rc);
  // The epoch-e order is the seed+e order: epoch 1 of seed 5 is epoch 0 of seed 6.
  EXPECT_EQ(b.epoch_order(1), c.epoch_order(0));
  // The loader does not draw from the global generator.
  manual_seed(3);
  const double r1 = rand({1}).item<double>();
  manual_seed(3);
  run(b, 1);
  EXPECT_EQ(rand({1}).item<double>(), r1);
}

TEST(DataLoader, PrefetchOnAndOffGiveTheSameBatches) {
  for (int64_t prefetch : {1, 2, 8}) {
    data::DataLoader on(index_dataset(333),
                        data::DataLoaderOptions().batch_size(10).shuffle(true).seed(1).prefetch(prefetch));
    data::DataLoader off(index_dataset(333),
                         data::DataLoaderOptions().batch_size(10).shuffle(true).seed(1).prefetch(0));
    EXPECT_EQ(run(on, 2), run(off, 2)) << "prefetch " << prefetch;
  }
}

TEST(DataLoader, ResumeIsBitIdentical) {
  const auto opts = data::DataLoaderOptions().batch_size(7).shuffle(true).seed(42);
  const int64_t n = 100;  // 15 batches per epoch, the last of 2
  const Tensor x = randn({n, 3, 2});
  const Tensor y = arange(0.0, double(n), 1.0, kInt64);
  auto bytes = [](const data::Example& b) {
    return std::string(static_cast<const char*>(b.data.raw_data()), b.data.nbytes()) +
           std::string(static_cast<const char*>(b.target.raw_data()), b.target.nbytes());
  };
  std::vector<std::string> whole;
  {
    data::DataLoader l(data::TensorDataset(x, y), opts);
    for (int e = 0; e < 3; ++e)
      for (auto& b : l) whole.push_back(bytes(b));
  }
  ASSERT_EQ(whole.size(), 45u);
  for (size_t stop_after : {0u, 1u, 14u, 15u, 16u, 29u, 30u, 44u}) {
    for (int64_t prefetch : {0, 2}) {
      std::vector<std::string> got;
      StateDict sd;
      {
        data::DataLoader l(data::TensorDataset(x, y), data::DataLoaderOptions(opts).prefetch(prefetch));
        // Consume `stop_after` batches in the way a training loop does, breaking mid-epoch.
        while (got.size() < stop_after) {
          for (auto& b : l) {
            got.push_back(bytes(b));
            if (got.size() == stop_after) break;
          }
        }
        sd = l.state();
      }  // the loader (and its prefetch thread) is gone, as after a crash
      data::DataLoader r(data::TensorDataset(x, y), data::DataLoaderOptions(opts).seed(999).prefetch(prefetch));
      r.load_state(sd);
      EXPECT_EQ(r.options().seed(), 42u);
      while (got.size() < whole.size())
        for (auto& b : r) got.push_back(bytes(b));
      EXPECT_EQ(got, whole) << "resumed after " << stop_after << " batches, prefetch " << prefetch;
    }
  }
  // State contents and refusal of an incompatible loader.
  data::DataLoader l(data::TensorDataset(x, y), opts);
  auto it = l.begin();
  ++it;
  const StateDict sd = l.state();
  EXPECT_EQ(state_at(sd, "epoch", "t").item<int64_t>(), 0);
  EXPECT_EQ(state_at(sd, "batch", "t").item<int64_t>(), 2);
  EXPECT_EQ(state_at(sd, "seed", "t").item<int64_t>(), 42);
  data::DataLoader other(data::TensorDataset(x, y), data::DataLoaderOptions(opts).batch_size(8));
  EXPECT_TRUE(throws_with([&] { other.load_state(sd); }, {"[data] cannot resume", "batch_size 7", "has 8"}));
  EXPECT_TRUE(throws_with([&] { other.load_state({}); }, {"[data] state dict has no entry"}));
}

TEST(DataLoader, HostileStateIsRefusedAndChangesNothing) {
  // A state dict read from a file may hold any shape, dtype or value in any entry.
  const auto opts = data::DataLoaderOptions().batch_size(7).shuffle(true).seed(42);
  const Tensor x = randn({100, 3});
  const Tensor y = arange(0.0, 100.0, 1.0, kInt64);
  data::DataLoader l(data::TensorDataset(x, y), opts);
  const StateDict good = l.state();
  auto with = [&](const std::string& key, const Tensor& v) {
    StateDict sd = good;
    sd[key] = v;
    return sd;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::string key;
    Tensor value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"seed", zeros({0}, kInt64), "'seed' should hold one value, got shape (0,)"},
      {"seed", zeros({2}, kInt64), "'seed' should hold one value, got shape (2,)"},
      {"epoch", scalar_tensor(nan, kFloat64), "'epoch' is nan, expected an integer"},
      {"batch", scalar_tensor(1e300, kFloat64), "'batch' is 1e+300, expected an integer"},
      {"batch", scalar_tensor(2.5, kFloat32), "'batch' is 2.5, expected an integer"},
      {"epoch", state_int(-1), "position epoch -1 batch 0 is invalid"},
      {"batch", state_int(16), "position epoch 0 batch 16 is invalid for 15 batches"},
      {"batch_size", scalar_tensor(-nan, kFloat64), "'batch_size' is"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key + ": " + c.message);
    EXPECT_TRUE(throws_with([&] { l.load_state(with(c.key, c.value)); }, {"[data]", c.message}));
    EXPECT_EQ(l.options().seed(), 42u);  // unchanged
    EXPECT_EQ(l.epoch(), 0);
  }
  // Integral values in other dtypes are read exactly (a uint8 flag, a float64 counter).
  StateDict ok = with("shuffle", full({}, 1.0, kUInt8));
  ok["batch"] = scalar_tensor(3.0, kFloat64);
  l.load_state(ok);
  EXPECT_EQ(l.batch_index(), 3);
}

TEST(DataLoader, WorkerExceptionReachesTheConsumer) {
  for (int64_t prefetch : {0, 1, 3}) {
    data::DataLoader l(Faulty(37), data::DataLoaderOptions().batch_size(10).prefetch(prefetch));
    int64_t batches = 0;
    EXPECT_TRUE(throws_with(
        [&] {
          for (auto& b : l) {
            (void)b;
            ++batches;
          }
        },
        {"[data] example 37 is unreadable"}));
    EXPECT_EQ(batches, 3) << "prefetch " << prefetch;
    EXPECT_EQ(l.batch_index(), 3);  // the failed batch is next again
    EXPECT_TRUE(throws_with([&] { l.begin(); }, {"example 37"}));
  }
  // The default get_batch stacks get(i).
  data::DataLoader ok(Faulty(-1), data::DataLoaderOptions(8));
  auto it = ok.begin();
  EXPECT_EQ(it->data.sizes(), (Shape{8, 2}));
  EXPECT_EQ(ids(*it), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, EarlyDestructionIsClean) {
  // Destroy loaders and iterators mid-epoch in every order, while the worker is busy,
  // blocked on a full queue, or done; ThreadSanitizer/ASan builds check for races.
  for (int rep = 0; rep < 200; ++rep) {
    const auto opts = data::DataLoaderOptions().batch_size(4).shuffle(true).seed(rep).prefetch(1 + rep % 4);
    switch (rep % 4) {
      case 0: {  // break out of the loop, then the loader goes
        data::DataLoader l(Slow(), opts);
        for (auto& b : l) {
          (void)b;
          break;
        }
        break;
      }
      case 1: {  // the loader dies before its iterator
        auto l = std::make_unique<data::DataLoader>(Slow(), opts);
        auto it = l->begin();
        ++it;
        l.reset();
        break;
      }
      case 2: {  // a new pass replaces a running one
        data::DataLoader l(Slow(), opts);
        auto first = l.begin();
        auto second = l.begin();
        ++first;
        EXPECT_TRUE(first == std::default_sentinel);  // the replaced pass ends
        EXPECT_FALSE(second == std::default_sentinel);
        break;
      }
      case 3: {  // never consumed at all
        data::DataLoader l(index_dataset(50), opts);
        auto it = l.begin();
        break;
      }
    }
  }
}

// ---------------------------------------------------- DataLoader sharding across ranks

namespace {

// The indices each of `replicas` loaders reads in `epoch`, batch by batch.
std::vector<std::vector<std::vector<int64_t>>> shards(int64_t n, int64_t replicas, int64_t batch, bool shuffle,
                                                      bool drop_last, int64_t epoch = 0) {
  std::vector<std::vector<std::vector<int64_t>>> out;
  for (int64_t r = 0; r < replicas; ++r) {
    data::DataLoader l(
        index_dataset(n),
        data::DataLoaderOptions(batch).shuffle(shuffle).seed(5).drop_last(drop_last).num_replicas(replicas).rank(r));
    l.set_epoch(epoch);
    out.push_back(run(l, 1));
  }
  return out;
}

// The one-process permutation of epoch `epoch` (the order every rank starts from).
std::vector<int64_t> permutation_of(int64_t n, bool shuffle, int64_t epoch = 0) {
  data::DataLoader one(index_dataset(n), data::DataLoaderOptions(1).shuffle(shuffle).seed(5));
  return one.epoch_order(epoch);
}

// PyTorch's DistributedSampler, written as it is there: pad `perm` with copies of its own
// head (`indices += indices[:padding]`, repeated while it is too short) or cut it.
std::vector<int64_t> padded_order(std::vector<int64_t> perm, int64_t replicas, bool drop_last) {
  const int64_t n = static_cast<int64_t>(perm.size());
  if (drop_last) {
    perm.resize(static_cast<size_t>(n / replicas * replicas));
    return perm;
  }
  const int64_t total = (n + replicas - 1) / replicas * replicas;
  const std::vector<int64_t> head = perm;
  while (static_cast<int64_t>(perm.size()) < total) {
    const int64_t take = std::min<int64_t>(n, total - static_cast<int64_t>(perm.size()));
    perm.insert(perm.end(), head.begin(), head.begin() + take);
  }
  return perm;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(DataLoaderShards, DisjointAndCoveringWithDropLast) {
  for (int64_t replicas : {1, 2, 3}) {
    for (int64_t n : {12, 13, 4, 3}) {  // divisible by 1, 2, 3 or not; 3 == replicas at most
      SCOPED_TRACE("replicas " + std::to_string(replicas) + " n " + std::to_string(n));
      // Batch 1: the shards hold exactly the first floor(n / replicas) * replicas elements
      // of the permutation, each once.
      const auto s = shards(n, replicas, 1, true, true);
      std::vector<int64_t> all;
      for (const auto& rank : s) {
        EXPECT_EQ(rank.size(), s[0].size()) << "every rank has as many batches";
        const auto f = flatten(rank);
        all.insert(all.end(), f.begin(), f.end());
      }
      all = sorted(all);
      EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "disjoint";
      const auto perm = permutation_of(n, true);
      const int64_t kept = n / replicas * replicas;
      EXPECT_EQ(all, sorted(std::vector<int64_t>(perm.begin(), perm.begin() + kept)));
      if (n % replicas == 0) {  // nothing cut: the shards cover the dataset exactly
        std::vector<int64_t> every(static_cast<size_t>(n));
        std::iota(every.begin(), every.end(), int64_t{0});
        EXPECT_EQ(all, every);
      }
      // Batch 2: each shard also loses its last partial batch (shard of n / replicas).
      const auto s2 = shards(n, replicas, 2, true, true);
      for (size_t r = 0; r < s2.size(); ++r) {
        EXPECT_EQ(static_cast<int64_t>(s2[r].size()), n / replicas / 2) << "rank " << r;
        const auto f1 = flatten(s[r]), f2 = flatten(s2[r]);
        EXPECT_TRUE(std::equal(f2.begin(), f2.end(), f1.begin())) << "rank " << r << ": a prefix of its shard";
      }
    }
  }
}

TEST(DataLoaderShards, PaddingRepeatsThePermutationsFirstElements) {
  const int64_t n = 13, replicas = 3;  // padded to 15: the permutation's first 2 again
  data::DataLoader one(index_dataset(n), data::DataLoaderOptions(1).shuffle(true).seed(5));
  const std::vector<int64_t> perm = one.epoch_order(0);
  const auto s = shards(n, replicas, 4, true, false);
  // Interleaving the shards (rank r's j-th element is position j * replicas + r) gives the
  // padded permutation: the same permutation on every rank.
  std::vector<std::vector<int64_t>> flat(replicas);
  for (int64_t r = 0; r < replicas; ++r)
    for (const auto& b : s[static_cast<size_t>(r)]) flat[r].insert(flat[r].end(), b.begin(), b.end());
  for (int64_t pos = 0; pos < 15; ++pos)
    EXPECT_EQ(flat[pos % replicas][pos / replicas], perm[static_cast<size_t>(pos % n)]) << "position " << pos;
}

TEST(DataLoaderShards, UnionOfRankBatchesIsTheOneProcessBatch) {
  const int64_t n = 48, replicas = 3, b = 4;
  data::DataLoader one(index_dataset(n), data::DataLoaderOptions(b * replicas).shuffle(true).seed(5));
  const auto whole = run(one, 1);
  const auto s = shards(n, replicas, b, true, false);
  ASSERT_EQ(s[0].size(), whole.size());
  for (size_t j = 0; j < whole.size(); ++j) {
    std::vector<int64_t> u;
    for (const auto& rank : s) u.insert(u.end(), rank[j].begin(), rank[j].end());
    std::vector<int64_t> w = whole[j];
    std::sort(u.begin(), u.end());
    std::sort(w.begin(), w.end());
    EXPECT_EQ(u, w) << "batch " << j;
  }
}

TEST(DataLoaderShards, ReshuffledPerEpoch) {
  EXPECT_NE(shards(40, 2, 4, true, false, 0)[1], shards(40, 2, 4, true, false, 1)[1]);
  EXPECT_EQ(shards(40, 2, 4, true, false, 1)[1], shards(40, 2, 4, true, false, 1)[1]);
}

TEST(DataLoaderShards, ResumeAndItsLimits) {
  auto opts = data::DataLoaderOptions(3).shuffle(true).seed(9).num_replicas(2).rank(1);
  data::DataLoader a(index_dataset(30), opts);
  std::vector<std::vector<int64_t>> first;
  for (auto& b : a) {
    first.push_back(ids(b));
    if (first.size() == 2) break;
  }
  const StateDict st = a.state();
  std::vector<std::vector<int64_t>> rest_a;
  for (auto& b : a) rest_a.push_back(ids(b));
  data::DataLoader b(index_dataset(30), opts);
  b.load_state(st);
  EXPECT_EQ(run(b, 1), rest_a);
  data::DataLoader other_world(index_dataset(30), data::DataLoaderOptions(opts).num_replicas(3));
  EXPECT_TRUE(throws_with([&] { other_world.load_state(st); }, {"num_replicas 2", "another world size"}));
  data::DataLoader other_rank(index_dataset(30), data::DataLoaderOptions(opts).rank(0));
  EXPECT_TRUE(throws_with([&] { other_rank.load_state(st); }, {"saved by rank 1"}));
  // A state without the sharding keys (an older checkpoint) is one process.
  StateDict old = data::DataLoader(index_dataset(30), data::DataLoaderOptions(3).shuffle(true).seed(9)).state();
  old.erase("num_replicas");
  old.erase("rank");
  data::DataLoader single(index_dataset(30), data::DataLoaderOptions(3).shuffle(true));
  EXPECT_NO_THROW(single.load_state(old));
  EXPECT_TRUE(throws_with([&] { other_world.load_state(old); }, {"num_replicas 1"}));
}

TEST(DataLoaderShards, BadRankOrWorldIsRefused) {
  EXPECT_TRUE(throws_with([] { data::DataLoader(index_dataset(4), data::DataLoaderOptions(1).num_replicas(0)); },
                          {"num_replicas must be at least 1, got 0"}));
  EXPECT_TRUE(
      throws_with([] { data::DataLoader(index_dataset(4), data::DataLoaderOptions(1).num_replicas(2).rank(2)); },
                  {"rank must be in [0, 2)", "got 2"}));
}

TEST(DataLoaderShards, HandComputedUnshuffledShards) {
  using V = std::vector<int64_t>;
  using B = std::vector<V>;
  // n 5, 2 ranks, batch 2: padded 0 1 2 3 4 | 0; rank 0 takes 0 2 4, rank 1 takes 1 3 0.
  EXPECT_EQ(shards(5, 2, 2, false, false), (std::vector<B>{{{0, 2}, {4}}, {{1, 3}, {0}}}));
  // With drop_last: cut to 0 1 2 3; rank 0 takes 0 2, rank 1 takes 1 3.
  EXPECT_EQ(shards(5, 2, 2, false, true), (std::vector<B>{{{0, 2}}, {{1, 3}}}));
  // n 7, 3 ranks: padded 0..6 | 0 1.
  EXPECT_EQ(shards(7, 3, 3, false, false), (std::vector<B>{{{0, 3, 6}}, {{1, 4, 0}}, {{2, 5, 1}}}));
  // n 2 < 5 ranks: the head repeats as often as needed, 0 1 | 0 1 0.
  EXPECT_EQ(shards(2, 5, 1, false, false), (std::vector<B>{{{0}}, {{1}}, {{0}}, {{1}}, {{0}}}));
  // epoch_order is the rank's shard.
  data::DataLoader r1(index_dataset(7), data::DataLoaderOptions(2).num_replicas(3).rank(1));
  EXPECT_EQ(r1.epoch_order(0), (V{1, 4, 0}));
  EXPECT_EQ(r1.size(), 2);
}

TEST(DataLoaderShards, PaddingCoversEveryIndexAndDuplicatesTheHead) {
  for (int64_t n : {13, 7, 2, 1}) {
    for (int64_t replicas : {2, 3, 5}) {
      SCOPED_TRACE("n " + std::to_string(n) + " replicas " + std::to_string(replicas));
      const auto perm = permutation_of(n, true);
      const int64_t total = (n + replicas - 1) / replicas * replicas, pad = total - n;
      std::vector<int64_t> all;
      for (const auto& rank : shards(n, replicas, 3, true, false)) {
        const auto f = flatten(rank);
        all.insert(all.end(), f.begin(), f.end());
      }
      ASSERT_EQ(static_cast<int64_t>(all.size()), total);
      // Every index at least once; what is left after one of each is the padding.
      std::map<int64_t, int64_t> count;
      for (int64_t i : all) ++count[i];
      std::vector<int64_t> extra;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_GE(count[i], 1) << "index " << i << " is read by no rank";
        for (int64_t k = 1; k < count[i]; ++k) extra.push_back(i);
      }
      EXPECT_EQ(static_cast<int64_t>(count.size()), n);
      // The duplicates are the permutation's first `pad` elements (cyclically when pad > n).
      std::vector<int64_t> head;
      for (int64_t k = 0; k < pad; ++k) head.push_back(perm[static_cast<size_t>(k % n)]);
      EXPECT_EQ(sorted(extra), sorted(head));
    }
  }
}

TEST(DataLoaderShards, EveryRankSeesTheSamePermutationEachEpochReshuffled) {
  const int64_t n = 23, replicas = 3;
  for (bool drop_last : {false, true}) {
    std::vector<std::vector<int64_t>> interleaved_by_epoch;
    for (int64_t epoch : {0, 1, 2}) {
      SCOPED_TRACE("drop_last " + std::to_string(drop_last) + " epoch " + std::to_string(epoch));
      // Position j * replicas + r of the (padded or cut) permutation is rank r's element j.
      const auto s = shards(n, replicas, 1, true, drop_last, epoch);
      const auto expected = padded_order(permutation_of(n, true, epoch), replicas, drop_last);
      std::vector<int64_t> interleaved(expected.size(), -1);
      for (int64_t r = 0; r < replicas; ++r) {
        const auto f = flatten(s[static_cast<size_t>(r)]);
        for (size_t j = 0; j < f.size(); ++j) interleaved[j * replicas + static_cast<size_t>(r)] = f[j];
      }
      EXPECT_EQ(interleaved, expected);
      interleaved_by_epoch.push_back(interleaved);
    }
    EXPECT_NE(interleaved_by_epoch[0], interleaved_by_epoch[1]);
    EXPECT_NE(interleaved_by_epoch[1], interleaved_by_epoch[2]);
  }
  // A loader left to run several epochs moves through them on its own, every rank alike.
  for (int64_t r = 0; r < replicas; ++r) {
    data::DataLoader l(index_dataset(n),
                       data::DataLoaderOptions(4).shuffle(true).seed(5).num_replicas(replicas).rank(r));
    std::vector<int64_t> expected;
    for (int64_t e : {0, 1}) {
      const auto order = l.epoch_order(e);
      expected.insert(expected.end(), order.begin(), order.end());
    }
    EXPECT_EQ(flatten(run(l, 2)), expected) << "rank " << r;
    EXPECT_EQ(l.epoch(), 2);
  }
}

TEST(DataLoaderShards, SizeIsEqualOnEveryRank) {
  for (bool drop_last : {false, true})
    for (int64_t n : {1, 5, 12, 13, 100})
      for (int64_t replicas : {1, 2, 3, 4})
        for (int64_t b : {1, 2, 5}) {
          if (drop_last && n < replicas) continue;  // an error (see below)
          const int64_t shard = drop_last ? n / replicas : (n + replicas - 1) / replicas;
          const int64_t batches = drop_last ? shard / b : (shard + b - 1) / b;
          for (int64_t r = 0; r < replicas; ++r) {
            data::DataLoader l(index_dataset(n),
                               data::DataLoaderOptions(b).drop_last(drop_last).num_replicas(replicas).rank(r));
            EXPECT_EQ(l.size(), batches) << "drop_last " << drop_last << " n " << n << " replicas " << replicas << " b "
                                         << b << " rank " << r;
            EXPECT_EQ(static_cast<int64_t>(run(l, 1).size()), batches);
          }
        }
}

TEST(DataLoaderShards, UnionOfRankBatchesIsABatchOfThePaddedOrder) {
  for (bool drop_last : {false, true})
    for (int64_t n : {48, 50, 7})
      for (int64_t replicas : {2, 3})
        for (int64_t b : {1, 4}) {
          SCOPED_TRACE("drop_last " + std::to_string(drop_last) + " n " + std::to_string(n) + " replicas " +
                       std::to_string(replicas) + " b " + std::to_string(b));
          const auto padded = padded_order(permutation_of(n, true), replicas, drop_last);
          const auto s = shards(n, replicas, b, true, drop_last);
          // Batch j of the ranks together = positions [j*b*R, (j+1)*b*R) of the padded order.
          for (size_t j = 0; j < s[0].size(); ++j) {
            std::vector<int64_t> u;
            for (const auto& rank : s) u.insert(u.end(), rank[j].begin(), rank[j].end());
            const size_t lo = j * static_cast<size_t>(b * replicas);
            const size_t hi = std::min(padded.size(), lo + static_cast<size_t>(b * replicas));
            EXPECT_EQ(sorted(u), sorted(std::vector<int64_t>(padded.begin() + lo, padded.begin() + hi)))
                << "batch " << j;
          }
          // n a multiple of R: nothing padded or cut, so it is one process at batch b * R.
          if (n % replicas == 0) {
            data::DataLoader one(index_dataset(n),
                                 data::DataLoaderOptions(b * replicas).shuffle(true).seed(5).drop_last(drop_last));
            const auto whole = run(one, 1);
            ASSERT_EQ(whole.size(), s[0].size());
            for (size_t j = 0; j < whole.size(); ++j) {
              std::vector<int64_t> u;
              for (const auto& rank : s) u.insert(u.end(), rank[j].begin(), rank[j].end());
              EXPECT_EQ(sorted(u), sorted(whole[j])) << "batch " << j;
            }
          }
        }
}

TEST(DataLoaderShards, ResumeMidEpochOnEveryRank) {
  const int64_t replicas = 3;
  for (int64_t r = 0; r < replicas; ++r) {
    const auto opts = data::DataLoaderOptions(2).shuffle(true).seed(11).num_replicas(replicas).rank(r);
    data::DataLoader a(index_dataset(31), opts);
    a.set_epoch(1);
    int taken = 0;
    for (auto& b : a) {
      (void)b;
      if (++taken == 3) break;
    }
    const StateDict st = a.state();
    EXPECT_EQ(st.at("num_replicas").item<int64_t>(), replicas);
    EXPECT_EQ(st.at("rank").item<int64_t>(), r);
    const auto rest = run(a, 2);  // the rest of epoch 1, then epoch 2
    data::DataLoader b(index_dataset(31), opts);
    b.load_state(st);
    EXPECT_EQ(b.epoch(), 1);
    EXPECT_EQ(b.batch_index(), 3);
    EXPECT_EQ(run(b, 2), rest) << "rank " << r;
  }
}

TEST(DataLoaderShards, OldStateWithoutShardingKeysLoadsAsOneProcess) {
  const auto opts = data::DataLoaderOptions(4).shuffle(true).seed(3);
  data::DataLoader a(index_dataset(30), opts);
  StateDict st;
  {
    auto it = a.begin();
    ++it;  // two batches handed out
    st = a.state();
  }  // the pass ends here; the position stays
  st.erase("num_replicas");
  st.erase("rank");
  const auto rest = run(a, 1);
  data::DataLoader b(index_dataset(30), opts);
  ASSERT_NO_THROW(b.load_state(st));
  EXPECT_EQ(b.batch_index(), 2);
  EXPECT_EQ(run(b, 1), rest);
  // The same old state is a num_replicas 1 state: a sharded loader refuses it.
  data::DataLoader sharded(index_dataset(30), data::DataLoaderOptions(opts).num_replicas(2).rank(0));
  EXPECT_TRUE(
      throws_with([&] { sharded.load_state(st); }, {"num_replicas 1", "this loader has 2", "another world size"}));
  EXPECT_EQ(sharded.batch_index(), 0);  // unchanged
}

TEST(DataLoaderShards, NothingToReadAndBadOptionsAreRefused) {
  EXPECT_TRUE(throws_with(
      [] { data::DataLoader(index_dataset(2), data::DataLoaderOptions(1).drop_last(true).num_replicas(3)); },
      {"[data]", "drop_last", "num_replicas 3", "nothing to read", "2 examples"}));
  EXPECT_NO_THROW(data::DataLoader(index_dataset(3), data::DataLoaderOptions(1).drop_last(true).num_replicas(3)));
  EXPECT_NO_THROW(data::DataLoader(index_dataset(2), data::DataLoaderOptions(1).num_replicas(3).rank(2)));  // padded
  EXPECT_TRUE(throws_with([] { data::DataLoader(index_dataset(4), data::DataLoaderOptions(1).num_replicas(-1)); },
                          {"num_replicas must be at least 1, got -1"}));
  EXPECT_TRUE(
      throws_with([] { data::DataLoader(index_dataset(4), data::DataLoaderOptions(1).num_replicas(2).rank(-1)); },
                  {"rank must be in [0, 2)", "got -1"}));
  EXPECT_TRUE(throws_with([] { data::DataLoader(index_dataset(4), data::DataLoaderOptions(1).rank(1)); },
                          {"rank must be in [0, 1)", "got 1"}));
}

}  // namespace
