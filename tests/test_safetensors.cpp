// safetensors: byte-exact round trips in every dtype, a reader written from the spec
// (independent of src/io) reading our files, atomic writes, and a corpus of malformed
// files that must each give a clean "[io]" error.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/testing.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;
using tc::testing::read_file_bytes;
using tc::testing::TempDir;
using tc::testing::throws_with;

namespace {

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A tensor holding exactly `bytes` (copied), for bit-exact fixtures.
tc::Tensor from_bytes(const void* bytes, const tc::Shape& shape, tc::DType dt) {
  return tc::from_blob(const_cast<void*>(bytes), shape, dt).clone();
}
std::string raw(const tc::Tensor& t) {
  const tc::Tensor c = t.contiguous();
  return {static_cast<const char*>(c.raw_data()), c.nbytes()};
}

// One tensor of every dtype, with bit patterns that a lossy path would change: signed
// zeros, infinities, NaN payloads, subnormals, extreme integers.
tc::StateDict all_dtypes() {
  static const uint16_t bf16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc1, 0x0001, 0x3f80, 0xc2f7};
  static const uint16_t f16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0x0001, 0x3c00, 0x7bff};
  static const float f32[] = {0.0f, -0.0f, 1e-45f, 3.4028235e38f, -1.5f, 0.1f};
  static const double f64[] = {-0.0, 4.9e-324, 1.7976931348623157e308, 0.1};
  static const int64_t i64[] = {INT64_MIN, -1, 0, INT64_MAX};
  static const int32_t i32[] = {INT32_MIN, -7, 0, 7, INT32_MAX, 42};
  static const uint8_t u8[] = {0, 1, 127, 128, 255};
  static const uint8_t b[] = {1, 0, 0, 1};
  tc::StateDict sd;
  sd["w.bf16"] = from_bytes(bf16, {2, 4}, tc::kBFloat16);
  sd["w.f16"] = from_bytes(f16, {4, 2}, tc::kFloat16);
  sd["w.f32"] = from_bytes(f32, {2, 3}, tc::kFloat32);
  sd["w.f64"] = from_bytes(f64, {4}, tc::kFloat64);
  sd["i64"] = from_bytes(i64, {2, 1, 2}, tc::kInt64);
  sd["i32"] = from_bytes(i32, {6}, tc::kInt32);
  sd["u8"] = from_bytes(u8, {5}, tc::kUInt8);
  sd["mask"] = from_bytes(b, {2, 2}, tc::kBool);
  sd["scalar"] = tc::state_scalar(2.5);
  sd["step"] = tc::state_int(-3);
  sd["empty"] = tc::zeros({0, 3});
  return sd;
}

// ------------------------------------------------------------------ independent reader
// Written from the format description only (not from src/io): string scanning of the
// header, which is enough for files whose JSON has no escapes in names.
struct SpecTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

std::vector<int64_t> scan_ints(const std::string& h, size_t& pos) {
  std::vector<int64_t> v;
  pos = h.find('[', pos) + 1;
  while (h[pos] != ']') {
    if (h[pos] == ',' || h[pos] == ' ') {
      ++pos;
      continue;
    }
    size_t used = 0;
    v.push_back(std::stoll(h.substr(pos), &used));
    pos += used;
  }
  ++pos;
  return v;
}

std::map<std::string, SpecTensor> spec_read(const std::string& file, std::string& data) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  EXPECT_EQ(n % 8, 0u) << "header not padded to 8 bytes";
  const std::string h = file.substr(8, n);
  data = file.substr(8 + n);
  std::map<std::string, SpecTensor> out;
  size_t pos = 1;  // after '{'
  for (;;) {
    const size_t q = h.find('"', pos);
    if (q == std::string::npos) break;
    const size_t q2 = h.find('"', q + 1);
    const std::string name = h.substr(q + 1, q2 - q - 1);
    const size_t close = h.find('}', q2);
    if (name == "__metadata__") {
      pos = close + 1;
      continue;
    }
    SpecTensor t;
    const size_t d = h.find("\"dtype\"", q2);
    const size_t dq = h.find('"', h.find(':', d) + 1);
    t.dtype = h.substr(dq + 1, h.find('"', dq + 1) - dq - 1);
    size_t s = h.find("\"shape\"", q2);
    t.shape = scan_ints(h, s);
    size_t o = h.find("\"data_offsets\"", q2);
    const auto offs = scan_ints(h, o);
    EXPECT_EQ(offs.size(), 2u);
    t.begin = static_cast<uint64_t>(offs[0]);
    t.end = static_cast<uint64_t>(offs[1]);
    out[name] = t;
    pos = close + 1;
  }
  return out;
}

// ------------------------------------------------------------------ hand-made files
std::string make_file(const std::string& header, const std::string& data, std::optional<uint64_t> length = {}) {
  const uint64_t n = length.value_or(header.size());
  std::string f(8, '\0');
  for (int i = 0; i < 8; ++i) f[i] = static_cast<char>(n >> (8 * i));
  return f + header + data;
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtypeBitExact) {
  TempDir dir("safetensors");
  const auto sd = all_dtypes();
  tc::io::save_safetensors(dir / "a.safetensors", sd, {{"k", "v"}});
  const auto back = tc::io::load_safetensors(dir / "a.safetensors");
  ASSERT_EQ(back.tensors.size(), sd.size());
  for (const auto& [name, t] : sd) {
    SCOPED_TRACE(name);
    const auto& u = back.tensors.at(name);
    EXPECT_EQ(u.dtype(), t.dtype());
    EXPECT_EQ(u.sizes(), t.sizes());
    EXPECT_EQ(raw(u), raw(t));
  }
  EXPECT_EQ(back.metadata, (tc::io::Metadata{{"k", "v"}}));
}

TEST(Safetensors, IndependentSpecReaderReadsOurFile) {
  TempDir dir("safetensors");
  const auto sd = all_dtypes();
  tc::io::save_safetensors(dir / "a.safetensors", sd, {{"precision", "bf16"}});
  std::string data;
  const auto file = read_file_bytes(dir / "a.safetensors");
  const auto spec = spec_read(file, data);
  ASSERT_EQ(spec.size(), sd.size());
  const std::map<std::string, std::pair<tc::DType, size_t>> dtypes = {
      {"F32", {tc::kFloat32, 4}}, {"F16", {tc::kFloat16, 2}}, {"BF16", {tc::kBFloat16, 2}}, {"F64", {tc::kFloat64, 8}},
      {"I64", {tc::kInt64, 8}},   {"I32", {tc::kInt32, 4}},   {"U8", {tc::kUInt8, 1}},      {"BOOL", {tc::kBool, 1}}};
  uint64_t covered = 0;
  for (const auto& [name, t] : sd) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(spec.count(name));
    const SpecTensor& s = spec.at(name);
    ASSERT_TRUE(dtypes.count(s.dtype)) << s.dtype;
    EXPECT_EQ(dtypes.at(s.dtype).first, t.dtype());
    EXPECT_EQ(tc::Shape(s.shape.begin(), s.shape.end()), t.sizes());
    int64_t numel = 1;
    for (auto d : s.shape) numel *= d;
    ASSERT_EQ(s.end - s.begin, static_cast<uint64_t>(numel) * dtypes.at(s.dtype).second);
    ASSERT_LE(s.end, data.size());
    // Aligned to the element size, so readers can map the file and use it in place.
    EXPECT_EQ(s.begin % dtypes.at(s.dtype).second, 0u);
    EXPECT_EQ(data.substr(s.begin, s.end - s.begin), raw(t));
    covered += s.end - s.begin;
  }
  EXPECT_EQ(covered, data.size()) << "the data section must be fully indexed";
  EXPECT_NE(file.find("\"__metadata__\":{\"precision\":\"bf16\"}"), std::string::npos);
}

TEST(Safetensors, NonContiguousAndViewsAreWrittenContiguous) {
  TempDir dir("safetensors");
  const auto base = tc::arange(24, tc::kFloat32).reshape({2, 3, 4});
  tc::StateDict sd{{"t", base.transpose(0, 2)}, {"s", base.slice(2, 0, 4, 2)}, {"e", tc::ones({3}).expand({2, 3})}};
  tc::io::save_safetensors(dir / "v.safetensors", sd);
  const auto back = tc::io::load_safetensors(dir / "v.safetensors").tensors;
  for (const auto& [name, t] : sd) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(back.at(name).is_contiguous());
    EXPECT_TRUE(tc::testing::equal(back.at(name), t));
  }
}

TEST(Safetensors, MetadataAndNamesWithEscapesAndUnicode) {
  TempDir dir("safetensors");
  const tc::io::Metadata meta = {
      {"quote\"back\\slash", "line\nbreak\ttab\x01"}, {"unicode", "h\xc3\xa9llo \xf0\x9f\x98\x80"}, {"empty", ""}};
  tc::StateDict sd{{"layer.0/\"odd\" name\n", tc::ones({2})}, {"caf\xc3\xa9", tc::zeros({1}, tc::kInt64)}};
  tc::io::save_safetensors(dir / "m.safetensors", sd, meta);
  const auto back = tc::io::load_safetensors(dir / "m.safetensors");
  EXPECT_EQ(back.metadata, meta);
  EXPECT_EQ(back.tensors.size(), 2u);
  EXPECT_TRUE(back.tensors.count("layer.0/\"odd\" name\n"));
  EXPECT_TRUE(back.tensors.count("caf\xc3\xa9"));
}

TEST(Safetensors, ReadsEscapesOtherWritersUse) {
  // \u escapes (including a surrogate pair), other whitespace, and a null __metadata__.
  const std::string header =
      "{ \"__metadata__\" : null,\n\t\"caf\\u00e9\\ud83d\\ude00\\/x\" : {\"data_offsets\":[0,4], \"shape\":[1], "
      "\"dtype\":\"F32\"} }";
  float one = 1.0f;
  const auto f = tc::io::parse_safetensors(make_file(header, std::string(reinterpret_cast<char*>(&one), 4)));
  EXPECT_TRUE(f.metadata.empty());
  ASSERT_TRUE(f.tensors.count("caf\xc3\xa9\xf0\x9f\x98\x80/x"));
  EXPECT_EQ(f.tensors.at("caf\xc3\xa9\xf0\x9f\x98\x80/x").item<float>(), 1.0f);
}

TEST(Safetensors, EmptyStateDictAndZeroSizeTensors) {
  TempDir dir("safetensors");
  tc::io::save_safetensors(dir / "e.safetensors", {});
  EXPECT_TRUE(tc::io::load_safetensors(dir / "e.safetensors").tensors.empty());
  tc::io::save_safetensors(dir / "z.safetensors", {{"a", tc::zeros({0})}, {"b", tc::zeros({2, 0}, tc::kInt64)}});
  const auto z = tc::io::load_safetensors(dir / "z.safetensors").tensors;
  EXPECT_EQ(z.at("b").sizes(), (tc::Shape{2, 0}));
  EXPECT_TRUE(z.at("b").is_contiguous());  // no elements: contiguous, as in PyTorch
}

TEST(Safetensors, EmptyTensorWithAHugeDimensionIsUsable) {
  // Found by the fuzzer: (4, 0, 2^63-1) holds no bytes, so the file is valid; copying it
  // multiplied out byte strides (signed overflow) because empty tensors counted as
  // non-contiguous and the elementwise walker computed strides before seeing numel 0.
  const std::string header = "{\"t\":{\"dtype\":\"F32\",\"shape\":[4,0,9223372036854775807],\"data_offsets\":[0,0]}}";
  const auto f = tc::io::parse_safetensors(make_file(header, ""));
  const tc::Tensor& t = f.tensors.at("t");
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.clone().sizes(), t.sizes());
  EXPECT_EQ(t.to(tc::kBFloat16).numel(), 0);
  EXPECT_EQ(tc::io::parse_safetensors(tc::io::serialize_safetensors(f.tensors)).tensors.at("t").sizes(), t.sizes());
  // A non-contiguous view of an ordinary empty tensor copies cleanly too.
  EXPECT_EQ(tc::zeros({3, 0, 5}).transpose(0, 2).contiguous().sizes(), (tc::Shape{5, 0, 3}));
}

TEST(Safetensors, RefusesToSaveWhatTheFormatCannotHold) {
  TempDir dir("safetensors");
  EXPECT_TRUE(throws_with(
      [&] {
        tc::io::save_safetensors(dir / "x", {{"__metadata__", tc::ones({1})}});
      },
      {"[io]", "reserved"}));
  EXPECT_TRUE(throws_with([&] { tc::io::save_safetensors(dir / "x", {{"u", tc::Tensor()}}); }, {"[io]", "undefined"}));
  EXPECT_TRUE(throws_with(
      [&] {
        tc::io::save_safetensors(dir / "x", {{"bad\xff", tc::ones({1})}});
      },
      {"[io]", "UTF-8"}));
  EXPECT_FALSE(fs::exists(dir / "x"));
  EXPECT_TRUE(fs::is_empty(dir.path)) << "no temporary file may be left behind";
}

TEST(Safetensors, AtomicWriteLeavesOldFileOnCrash) {
  TempDir dir("safetensors");
  const auto target = dir / "w.safetensors";
  tc::io::save_safetensors(target, {{"old", tc::ones({4})}});
  const std::string before = read_file_bytes(target);
  // 4 MiB of data: the writer's chunks call the hook several times before the end.
  tc::StateDict big{{"new", tc::rand({1 << 20})}};
  size_t seen = 0;
  tc::io::set_atomic_write_hook([&](size_t written) {
    seen = written;
    if (written >= (2u << 20)) throw std::runtime_error("simulated crash");
  });
  EXPECT_THROW(tc::io::save_safetensors(target, big), std::runtime_error);
  tc::io::set_atomic_write_hook({});
  EXPECT_GE(seen, 2u << 20);
  EXPECT_EQ(read_file_bytes(target), before);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"w.safetensors"}) << "the temporary file must be removed";
  // And a write that completes replaces the file.
  tc::io::save_safetensors(target, big);
  EXPECT_TRUE(tc::testing::equal(tc::io::load_safetensors(target).tensors.at("new"), big.at("new")));
}

TEST(Safetensors, MissingFileAndDirectoryAreIoErrors) {
  TempDir dir("safetensors");
  EXPECT_TRUE(throws_with([&] { tc::io::load_safetensors(dir / "nope.safetensors"); },
                          {"[io]", "cannot open", "nope.safetensors"}));
  EXPECT_TRUE(throws_with([&] { tc::io::load_safetensors(dir.path); }, {"[io]", "it is a directory"}));
  EXPECT_TRUE(
      throws_with([&] { tc::io::save_safetensors(dir / "no" / "such" / "dir.st", {}); }, {"[io]", "cannot create"}));
}

// The corpus: each malformed file, written to disk and loaded, names its problem.
TEST(Safetensors, MalformedCorpusGivesCleanErrors) {
  TempDir dir("safetensors");
  const std::string f32x2(8, '\0');
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    const char* what;
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> corpus = {
      {"empty file", "", "too short"},
      {"7 bytes", std::string(7, '\x10'), "too short"},
      {"huge header length", make_file(ok_header, f32x2, uint64_t{1} << 40), "over the 100 MB limit"},
      {"max u64 header length", make_file(ok_header, f32x2, UINT64_MAX), "over the 100 MB limit"},
      {"header past end", make_file(ok_header, f32x2, ok_header.size() + 9), "runs past the end of the file"},
      {"truncated data", make_file(ok_header, f32x2.substr(0, 5)), "run past the data section"},
      {"truncated header", make_file(ok_header, "").substr(0, 30), "runs past the end of the file"},
      {"zero header", make_file("", ""), "does not start with '{'"},
      {"non-object header", make_file("[1,2]", ""), "does not start with '{'"},
      {"padded non-object", make_file(" \"str\"", ""), "does not start with '{'"},
      {"bad JSON", make_file(R"({"a":{"dtype":"F32",)", f32x2), "invalid JSON"},
      {"bad JSON trailing", make_file(ok_header + "x", f32x2), "after the end"},
      {"bad JSON float", make_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", f32x2),
       "non-integer"},
      {"invalid UTF-8", make_file("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f32x2),
       "UTF-8"},
      {"lone surrogate", make_file(R"({"\ud800":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32x2),
       "surrogate"},
      {"duplicate key",
       make_file(
           ok_header.substr(0, ok_header.size() - 1) + R"(,"a":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
           f32x2),
       "duplicate key"},
      {"deep nesting", make_file("{\"__metadata__\":" + std::string(1000, '[') + std::string(1000, ']') + "}", ""),
       "nested deeper"},
      {"integer overflow",
       make_file(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", f32x2), "64 bits"},
      {"unknown dtype", make_file(R"({"a":{"dtype":"F4","shape":[16],"data_offsets":[0,8]}})", f32x2),
       "unsupported dtype 'F4'"},
      {"dtype not a string", make_file(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", f32x2),
       "dtype is an integer"},
      {"negative shape", make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2),
       "negative shape"},
      {"shape overflow",
       make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", f32x2), "overflows"},
      {"wrong dtype size", make_file(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", f32x2), "needs 16"},
      {"wrong shape size", make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2),
       "hold 8 bytes"},
      {"offsets reversed", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32x2),
       "end before they begin"},
      {"offsets not a pair", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", f32x2),
       "[begin, end]"},
      {"negative offset", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", f32x2),
       "negative data_offsets"},
      {"out-of-range offsets",
       make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[1000000,1000008]}})", f32x2),
       "run past the data section"},
      {"overlapping offsets",
       make_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           f32x2),
       "overlap"},
      {"hole", make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32x2), "hole"},
      {"trailing bytes", make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", f32x2),
       "trailing bytes"},
      {"missing field", make_file(R"({"a":{"dtype":"F32","shape":[2]}})", f32x2), "lacks data_offsets"},
      {"unknown field", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", f32x2),
       "unknown field 'x'"},
      {"tensor not an object", make_file(R"({"a":[1,2]})", ""), "not an object"},
      {"metadata not an object", make_file(R"({"__metadata__":[1]})", ""), "__metadata__ is an array"},
      {"metadata value not a string", make_file(R"({"__metadata__":{"epoch":3}})", ""), "not a string"},
      {"BOOL byte not 0/1",
       make_file(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2)),
       "not 0 or 1"},
  };
  for (const auto& c : corpus) {
    SCOPED_TRACE(c.what);
    const auto path = dir / "bad.safetensors";
    write_bytes(path, c.bytes);
    EXPECT_TRUE(throws_with([&] { tc::io::load_safetensors(path); }, {"[io]", path.string(), c.message}));
  }
}

// Every prefix of a valid file is invalid; every one must be rejected cleanly.
TEST(Safetensors, EveryTruncationIsRejected) {
  const std::string file = tc::io::serialize_safetensors(all_dtypes(), {{"k", "v"}});
  for (size_t n = 0; n < file.size(); ++n) {
    SCOPED_TRACE(n);
    ASSERT_TRUE(throws_with([&] { tc::io::parse_safetensors(std::string_view(file).substr(0, n)); }, {"[io]"}));
  }
  EXPECT_EQ(tc::io::parse_safetensors(file).tensors.size(), all_dtypes().size());
}

// Random byte corruption must load or throw tc::Error: never crash, hang or allocate wildly.
TEST(Safetensors, RandomCorruptionNeverCrashes) {
  const std::string file = tc::io::serialize_safetensors(all_dtypes(), {{"k", "v"}});
  std::mt19937 rng(7);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = file;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the length and header, where structure lives.
      const size_t at = (rng() % 4 != 0) ? rng() % std::min<size_t>(bad.size(), 400) : rng() % bad.size();
      bad[at] = static_cast<char>(rng());
    }
    try {
      tc::io::parse_safetensors(bad);
    } catch (const tc::Error& e) {
      ++rejected;
      ASSERT_EQ(std::string(e.what()).rfind("[io]", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(Safetensors, LargeFileRoundTrip) {
  TempDir dir("safetensors");
  const auto t = tc::rand({25'000'000});  // 100 MB
  const auto start = std::chrono::steady_clock::now();
  tc::io::save_safetensors(dir / "big.safetensors", {{"w", t}});
  const auto mid = std::chrono::steady_clock::now();
  const auto back = tc::io::load_safetensors(dir / "big.safetensors");
  const auto end = std::chrono::steady_clock::now();
  EXPECT_EQ(raw(back.tensors.at("w")), raw(t));
  std::printf("100 MB: save %.0f ms (with fsync), load %.0f ms\n",
              std::chrono::duration<double, std::milli>(mid - start).count(),
              std::chrono::duration<double, std::milli>(end - mid).count());
}
