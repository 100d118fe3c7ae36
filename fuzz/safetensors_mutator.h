// A structure-aware mutator for safetensors files, for LLVMFuzzerCustomMutator and
// LLVMFuzzerCustomCrossOver. Byte flips almost always break the container (the header
// length, the JSON, the offsets that must tile the data) and stop at the first check; this
// parses the container, changes what a tensor or metadata entry holds — dtype, shape, the
// values, names, metadata numbers turned huge, negative, NaN or not numbers at all — and
// writes a well-formed file again, so inputs reach the code that uses the contents. A
// quarter of the mutations (and every input that does not parse) stay byte-level.
#pragma once
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "io/json.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace fuzz {

struct StTensor {
  std::string name, dtype;
  std::vector<std::string> shape;  // JSON number tokens, so they can be negative or too big
  std::string data;
};

struct StFile {
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<StTensor> tensors;
};

inline std::optional<StFile> st_parse(const uint8_t* bytes, size_t size) {
  namespace json = tc::io::json;
  if (size < 8) return std::nullopt;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > size - 8) return std::nullopt;
  const std::string_view all(reinterpret_cast<const char*>(bytes), size);
  const std::string_view data = all.substr(8 + n);
  StFile f;
  try {
    const json::Value root = json::parse(all.substr(8, n), "<mutator>");
    if (root.kind != json::Value::Kind::Object) return std::nullopt;
    for (const auto& [name, v] : root.object) {
      if (name == "__metadata__") {
        for (const auto& [k, s] : v.object)
          if (s.kind == json::Value::Kind::String) f.metadata.emplace_back(k, s.string);
        continue;
      }
      StTensor t;
      t.name = name;
      const json::Value* dt = v.find("dtype");
      const json::Value* shape = v.find("shape");
      const json::Value* off = v.find("data_offsets");
      if (dt && dt->kind == json::Value::Kind::String) t.dtype = dt->string;
      if (shape)
        for (const auto& d : shape->array) t.shape.push_back((d.negative ? "-" : "") + std::to_string(d.magnitude));
      if (off && off->array.size() == 2 && off->array[0].magnitude <= off->array[1].magnitude &&
          off->array[1].magnitude <= data.size())
        t.data = std::string(data.substr(off->array[0].magnitude, off->array[1].magnitude - off->array[0].magnitude));
      f.tensors.push_back(std::move(t));
    }
  } catch (const tc::Error&) {
    return std::nullopt;
  } catch (...) {
    fuzz::escaped();  // json::parse is a reader under test here too
  }
  return f;
}

inline std::string st_serialize(const StFile& f) {
  namespace json = tc::io::json;
  std::string h = "{";
  if (!f.metadata.empty()) {
    h += "\"__metadata__\":{";
    for (size_t i = 0; i < f.metadata.size(); ++i) {
      if (i) h += ',';
      json::append_string(h, f.metadata[i].first);
      h += ':';
      json::append_string(h, f.metadata[i].second);
    }
    h += '}';
  }
  uint64_t offset = 0;
  std::string data;
  for (const auto& t : f.tensors) {
    if (h.size() > 1) h += ',';
    json::append_string(h, t.name);
    h += ":{\"dtype\":";
    json::append_string(h, t.dtype);
    h += ",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + t.shape[i];
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
    data += t.data;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  return out + h + data;
}

class StMutator {
 public:
  explicit StMutator(unsigned seed) : rng_(seed) {}

  // One to three edits of `f`.
  void mutate(StFile& f) {
    for (int n = 1 + pick(3); n > 0; --n) {
      switch (pick(10)) {
        case 0:
        case 1:
        case 2:
          mutate_tensor(f);
          break;
        case 3:
        case 4:
        case 5:
          mutate_metadata_value(f);
          break;
        case 6:
          add_metadata(f);
          break;
        case 7:
          if (!f.metadata.empty()) f.metadata.erase(f.metadata.begin() + pick(f.metadata.size()));
          break;
        case 8:
          if (!f.tensors.empty()) f.tensors.erase(f.tensors.begin() + pick(f.tensors.size()));
          break;
        case 9:
          add_tensor(f);
          break;
      }
    }
  }

  // Takes a tensor or a metadata entry of `other` into `f`.
  void cross(StFile& f, const StFile& other) {
    if (!other.tensors.empty() && (other.metadata.empty() || pick(2))) {
      const StTensor& t = other.tensors[pick(other.tensors.size())];
      for (auto& mine : f.tensors)
        if (mine.name == t.name) {
          mine = t;
          return;
        }
      f.tensors.push_back(t);
    } else if (!other.metadata.empty()) {
      const auto& kv = other.metadata[pick(other.metadata.size())];
      set_metadata(f, kv.first, kv.second);
    }
  }

 private:
  static constexpr size_t kMaxData = 1 << 16;  // bytes a resized tensor may get

  size_t pick(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng_) : 0; }
  template <class T, size_t N>
  const T& one_of(const T (&a)[N]) {
    return a[pick(N)];
  }

  static size_t element_size(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64") return 8;
    if (dtype == "F32" || dtype == "I32") return 4;
    if (dtype == "F16" || dtype == "BF16") return 2;
    return 1;
  }

  // numel of a shape of small non-negative dims; nullopt when it has another token.
  static std::optional<uint64_t> numel(const std::vector<std::string>& shape) {
    uint64_t n = 1;
    for (const auto& d : shape) {
      if (d.empty() || d.size() > 6 || d.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      n *= std::stoull(d);
      if (n > kMaxData) return std::nullopt;
    }
    return n;
  }

  // Makes the data size match dtype x shape when that is small, filling new bytes.
  void fit_data(StTensor& t) {
    const auto n = numel(t.shape);
    if (!n || *n * element_size(t.dtype) > kMaxData || pick(8) == 0) return;
    const size_t old = t.data.size();
    t.data.resize(*n * element_size(t.dtype));
    for (size_t i = old; i < t.data.size(); ++i) t.data[i] = static_cast<char>(t.dtype == "BOOL" ? pick(2) : pick(256));
  }

  void mutate_tensor(StFile& f) {
    if (f.tensors.empty()) return add_tensor(f);
    StTensor& t = f.tensors[pick(f.tensors.size())];
    static const char* const kDTypes[] = {"F32",  "F16", "BF16",    "F64",     "I64",     "I32", "U8",
                                          "BOOL", "I16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",  ""};
    static const char* const kDims[] = {"0",
                                        "1",
                                        "2",
                                        "3",
                                        "7",
                                        "-1",
                                        "-0",
                                        "4294967296",
                                        "2147483648",
                                        "4611686018427387904",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "18446744073709551615",
                                        "1.5"};
    switch (pick(7)) {
      case 0:  // dtype
        t.dtype = one_of(kDTypes);
        fit_data(t);
        break;
      case 1:  // one dimension
        if (t.shape.empty()) t.shape.push_back("1");
        t.shape[pick(t.shape.size())] = pick(3) ? std::to_string(pick(9)) : one_of(kDims);
        fit_data(t);
        break;
      case 2:  // rank
        if (!t.shape.empty() && pick(2))
          t.shape.erase(t.shape.begin() + pick(t.shape.size()));
        else
          t.shape.insert(t.shape.begin() + pick(t.shape.size() + 1), std::to_string(pick(5)));
        fit_data(t);
        break;
      case 3:  // a 1-d view of whatever data there is
        t.shape = {std::to_string(t.data.size() / element_size(t.dtype))};
        t.data.resize(t.data.size() / element_size(t.dtype) * element_size(t.dtype));
        break;
      case 4:
        special_values(t);
        break;
      case 5: {  // libFuzzer's byte mutations, on this tensor's data only
        if (t.data.empty()) t.data.push_back(static_cast<char>(pick(256)));
        std::string buf = t.data;
        buf.resize(std::max<size_t>(64, 2 * buf.size()));
        buf.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(buf.data()), t.data.size(), buf.size()));
        t.data = std::move(buf);
        break;
      }
      case 6:
        t.name = rename(t.name);
        break;
    }
  }

  // Overwrites a few elements with the values readers trip on.
  void special_values(StTensor& t) {
    const size_t es = element_size(t.dtype);
    if (t.data.size() < es) return;
    static const uint64_t k8[] = {0x7ff8000000000000, 0x7ff0000000000000, 0xfff0000000000000, 0x8000000000000000,
                                  0x7fffffffffffffff, 0xffffffffffffffff, 0x0000000000000001, 0x43e0000000000000,
                                  0xc3e0000000000000, 0x0000000000000000, 0x3ff0000000000000, 0x4330000000000000};
    static const uint32_t k4[] = {0x7fc00000, 0x7f800000, 0xff800000, 0x80000000, 0x7fffffff, 0xffffffff,
                                  0x00000001, 0x5f000000, 0xdf000000, 0x00000000, 0x3f800000, 0x4f000000};
    static const uint16_t k2[] = {0x7e00, 0x7c00, 0xfc00, 0x7fc0, 0x7f80, 0xff80, 0x8000, 0x0001, 0x7bff, 0xffff};
    static const uint8_t k1[] = {0, 1, 2, 0x7f, 0x80, 0xff};
    for (int n = 1 + pick(4); n > 0; --n) {
      char* p = t.data.data() + pick(t.data.size() / es) * es;
      switch (es) {
        case 8: {
          const uint64_t v = one_of(k8);
          std::memcpy(p, &v, 8);
          break;
        }
        case 4: {
          const uint32_t v = one_of(k4);
          std::memcpy(p, &v, 4);
          break;
        }
        case 2: {
          const uint16_t v = one_of(k2);
          std::memcpy(p, &v, 2);
          break;
        }
        default:
          *p = static_cast<char>(one_of(k1));
      }
    }
  }

  std::string rename(const std::string& name) {
    static const char* const kPrefixes[] = {"model.", "optim.", "scaler.", "loader.", "rng.", "lr_scheduler.", ""};
    static const char* const kNames[] = {"rng.cpu",
                                         "loader.epoch",
                                         "loader.batch",
                                         "loader.seed",
                                         "loader.batch_size",
                                         "loader.dataset_size",
                                         "loader.shuffle",
                                         "loader.drop_last",
                                         "loader.permutation",
                                         "scaler.scale",
                                         "scaler.growth_tracker",
                                         "scaler._growth_tracker",
                                         "scaler.growth_factor",
                                         "scaler.backoff_factor",
                                         "scaler.growth_interval",
                                         "optim.state.0.step",
                                         "optim.state.0.exp_avg",
                                         "optim.state.0.exp_avg_sq",
                                         "optim.state.0.momentum_buffer",
                                         "optim.state.1.step",
                                         "optim.param_groups.0.lr",
                                         "optim.param_groups.0.weight_decay",
                                         "optim.param_groups.0.betas",
                                         "optim.param_groups.0.eps",
                                         "optim.param_groups.0.params",
                                         "model.0.weight",
                                         "model.0.bias",
                                         "model.2.weight",
                                         "model.2.bias",
                                         "model.1.running_mean",
                                         "model.1.num_batches_tracked",
                                         "lr_scheduler.last_epoch",
                                         "lr_scheduler.base_lrs.0",
                                         "__metadata__"};
    if (pick(2)) return one_of(kNames);
    const size_t dot = name.find('.');
    return std::string(one_of(kPrefixes)) + (dot == std::string::npos ? name : name.substr(dot + 1));
  }

  void add_tensor(StFile& f) {
    StTensor t;
    t.name = rename("x");
    t.dtype = pick(2) ? "I64" : "F32";
    if (pick(2)) t.shape.push_back(std::to_string(pick(5)));
    fit_data(t);
    f.tensors.push_back(std::move(t));
  }

  std::string odd_value(const std::string& old) {
    static const char* const kValues[] = {"-1",
                                          "0",
                                          "1",
                                          "2",
                                          "-0",
                                          "+1",
                                          " 1",
                                          "1 ",
                                          "",
                                          "abc",
                                          "1.5",
                                          "1e3",
                                          "0x10",
                                          "1e308",
                                          "-1e308",
                                          "1e-320",
                                          "nan",
                                          "NaN",
                                          "-nan",
                                          "inf",
                                          "-inf",
                                          "infinity",
                                          "2147483647",
                                          "2147483648",
                                          "4294967296",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "-9223372036854775808",
                                          "-9223372036854775809",
                                          "18446744073709551615",
                                          "99999999999999999999999",
                                          "fp16",
                                          "bf16",
                                          "fp32",
                                          "auto",
                                          "cnn",
                                          "mlp",
                                          "gpt",
                                          "cosine",
                                          "constant",
                                          "sgd",
                                          "adam",
                                          "adamw",
                                          "tensorcast.checkpoint"};
    int64_t v = 0;
    if (pick(3) == 0 && std::from_chars(old.data(), old.data() + old.size(), v).ec == std::errc()) {
      const uint64_t u = static_cast<uint64_t>(v);  // wraps at the int64 limits instead of overflowing
      switch (pick(4)) {
        case 0:
          return std::to_string(static_cast<int64_t>(u + 1));
        case 1:
          return std::to_string(static_cast<int64_t>(u - 1));
        case 2:
          return std::to_string(static_cast<int64_t>(0 - u));
        default:
          return std::to_string(v) + "0";
      }
    }
    return one_of(kValues);
  }

  void set_metadata(StFile& f, const std::string& key, const std::string& value) {
    for (auto& kv : f.metadata)
      if (kv.first == key) {
        kv.second = value;
        return;
      }
    f.metadata.emplace_back(key, value);
  }

  void mutate_metadata_value(StFile& f) {
    if (f.metadata.empty()) return add_metadata(f);
    auto& kv = f.metadata[pick(f.metadata.size())];
    kv.second = odd_value(kv.second);
  }

  void add_metadata(StFile& f) {
    static const char* const kKeys[] = {
        "format",      "format_version", "epoch",  "step",          "tensorcast_version",
        "model",       "precision",      "scaler", "batch_size",    "lr",
        "lr_schedule", "seed",           "data",   "train_seconds", "optimizer"};
    set_metadata(f, one_of(kKeys), odd_value(""));
  }

  std::minstd_rand rng_;
};

// The bodies of LLVMFuzzerCustomMutator / LLVMFuzzerCustomCrossOver for a target whose
// input is a safetensors file.
inline size_t st_custom_mutate(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  StMutator m(seed);
  std::optional<StFile> f;
  if (seed % 4 != 0) f = st_parse(data, size);
  if (!f) return LLVMFuzzerMutate(data, size, max_size);
  m.mutate(*f);
  const std::string out = st_serialize(*f);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

inline size_t st_custom_cross_over(const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2, uint8_t* out,
                                   size_t max_out, unsigned seed) {
  std::optional<StFile> a = st_parse(d1, s1), b = st_parse(d2, s2);
  if (!a || !b) return 0;  // libFuzzer then tries another mutation
  StMutator(seed).cross(*a, *b);
  const std::string bytes = st_serialize(*a);
  if (bytes.size() > max_out) return 0;
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}

}  // namespace fuzz

// libFuzzer's hooks, defined once per target that feeds safetensors files.
#define TC_FUZZ_SAFETENSORS_MUTATOR()                                                                     \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) { \
    return fuzz::st_custom_mutate(data, size, max_size, seed);                                            \
  }                                                                                                       \
  extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* d1, size_t s1, const uint8_t* d2, size_t s2, \
                                              uint8_t* out, size_t max_out, unsigned seed) {              \
    return fuzz::st_custom_cross_over(d1, s1, d2, s2, out, max_out, seed);                                \
  }
