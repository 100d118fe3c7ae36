// Writes the seed corpora fuzz/corpus/<target>/ (committed; rerun after a format change):
//   build-fuzz/fuzz/fuzz_make_corpus fuzz/corpus
// A few small, valid inputs per target, written with the library's own writers, so
// mutations start from files that get past the first checks.
#include <tensorcast/io/safetensors.h>
#include <tensorcast/io/summary_writer.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/crc32c.h"
#include "tiny_run.h"

namespace fs = std::filesystem;

namespace {

fs::path g_root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::FILE* f = std::fopen((dir / name).c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror((dir / name).c_str());
    std::exit(1);
  }
}

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

// An IDX file: magic 00 00 <type> <ndim>, big-endian dims, then `payload`.
std::string idx(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {0, 0, char(type), char(dims.size())};
  for (uint32_t d : dims) s += be32(d);
  return s + payload;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string bytes_of(uint64_t n, uint8_t start = 0) {
  std::string s;
  for (uint64_t i = 0; i < n; ++i) s += char(start + i * 37);
  return s;
}

// A checkpoint of fuzz::TinyRun after `steps` steps, as the CLI saves one.
std::string checkpoint(const std::string& optimizer, bool fp16, int steps, bool with_scheduler) {
  tc::manual_seed(1);
  fuzz::TinyRun run(optimizer, fp16);
  for (int i = 0; i < steps; ++i) run.train_step();
  tc::io::TrainingState st;
  st.model = run.model->state_dict();
  st.optimizer = run.optimizer->state_dict();
  st.scaler = run.scaler.state_dict();
  st.data_loader = run.loader.state();
  st.rng = tc::get_rng_state();
  st.epoch = run.loader.epoch();
  st.step = steps;
  st.metadata = {{"model", "cnn"}, {"precision", fp16 ? "fp16" : "bf16"},
                 {"scaler", "1"},  {"batch_size", "3"},
                 {"lr", "0.001"},  {"lr_schedule", "cosine"},
                 {"seed", "1"},    {"train_seconds", "0.25"}};
  if (optimizer != "adamw") st.metadata["optimizer"] = optimizer;
  tc::io::SafetensorsFile f = tc::io::to_safetensors(st);
  if (with_scheduler)
    for (const auto& [k, t] : run.scheduler->state_dict()) f.tensors.emplace("lr_scheduler." + k, t);
  return tc::io::serialize_safetensors(f.tensors, f.metadata);
}

// TensorBoard event file: a SummaryWriter's file, whose first record holds the time now.
std::string tfevents_written() {
  const fs::path dir = fs::temp_directory_path() / ("tc_make_corpus_" + std::to_string(::getpid()));
  std::string path;
  {
    tc::io::SummaryWriter w(dir.string());
    w.add_scalar("train/loss", 2.25, 0, 1700000000.5);
    w.add_scalar("amp/loss_scale", INFINITY, 1, 1700000001);
    w.add_scalar("test/accuracy", NAN, -3, 1700000002);
    w.add_scalar("perf/samples_per_s", -0.0, int64_t{1} << 40, 1700000003);
    path = w.path();
  }
  std::ifstream f(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  fs::remove_all(dir);
  return bytes;
}

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char(v >> (8 * i));
  return s;
}
std::string pb_bytes(int field, const std::string& b) {
  return char(field << 3 | 2) + std::string(1, char(b.size())) + b;
}
std::string tfrecord(const std::string& data) {
  const std::string len = le(data.size(), 8);
  return len + le(tc::io::mask_crc32c(tc::io::crc32c(0, len.data(), 8)), 4) + data +
         le(tc::io::mask_crc32c(tc::io::crc32c(0, data.data(), data.size())), 4);
}

// An Event the writer never makes: unknown fields of each wire type, a Value without a
// simple_value (an image), two Summary fields, the step after them.
std::string tfevents_other_fields() {
  const std::string scalar = pb_bytes(7, "node") + pb_bytes(1, "a") + "\x15" + le(0x40200000, 4);
  const std::string image = pb_bytes(1, "img") + pb_bytes(4, "png");
  return tfrecord(pb_bytes(3, "brain.Event:2")) +
         tfrecord("\x09" + le(0x41d954fc40000000, 8) + "\x20\x63" + "\x49" + le(1, 8) + "\x5d" + le(1, 4) +
                  pb_bytes(5, pb_bytes(1, scalar) + pb_bytes(1, image)) + pb_bytes(5, pb_bytes(1, pb_bytes(1, "b"))) +
                  "\x10\x2a");
}

const char* kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of\n"
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light,\n"
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had\n"
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all\n"
    "going direct the other way - in short, the period was so far like the present period, that some of\n"
    "its noisiest authorities insisted on its being received, for good or for evil, in the superlative\n"
    "degree of comparison only. There were a king with a large jaw and a queen with a plain face, on the\n"
    "throne of England; there were a king with a large jaw and a queen with a fair face, on the throne of\n"
    "France. \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus DIR (fuzz/corpus)\n");
    return 2;
  }
  g_root = argv[1];

  // checkpoint: the CLI's layout on the tiny run; adamw as the CLI, adam/sgd for their state
  put("checkpoint", "adamw_step0", checkpoint("adamw", false, 0, false));
  put("checkpoint", "adamw_fp16_step5", checkpoint("adamw", true, 5, false));
  put("checkpoint", "adam_step4_sched", checkpoint("adam", false, 4, true));
  put("checkpoint", "sgd_fp16_step2", checkpoint("sgd", true, 2, true));

  // safetensors: every dtype, a scalar, an empty tensor, metadata; an empty file; a checkpoint
  tc::manual_seed(2);
  const tc::StateDict all = {
      {"f32", tc::randn({2, 3})},
      {"f16", tc::randn({3}).to(tc::kFloat16)},
      {"bf16", tc::randn({2, 2}).to(tc::kBFloat16)},
      {"f64", tc::randn({2}).to(tc::kFloat64)},
      {"i64", tc::randint(-5, 5, {4})},
      {"i32", tc::randint(-5, 5, {2, 1}).to(tc::kInt32)},
      {"u8", tc::randint(0, 255, {5}).to(tc::kUInt8)},
      {"bool", tc::randint(0, 2, {3}).to(tc::kBool)},
      {"scalar", tc::state_scalar(0.5)},
      {"empty", tc::zeros({0, 4})},
  };
  put("safetensors", "all_dtypes", tc::io::serialize_safetensors(all, {{"note", "seed"}, {"step", "12"}}));
  put("safetensors", "empty", tc::io::serialize_safetensors({}));
  put("safetensors", "one_tensor", tc::io::serialize_safetensors({{"w", tc::ones({2})}}));
  put("safetensors", "checkpoint", checkpoint("adamw", true, 1, false));

  // json: safetensors headers and the corners of the grammar
  const std::string st = tc::io::serialize_safetensors({{"w", tc::ones({2})}}, {{"k", "v"}});
  put("json", "header", st.substr(8, st.size() - 8 - 8));
  put("json", "values", R"([null,true,false,0,-0,18446744073709551615,-9223372036854775808,"",[],{}])");
  put("json", "strings", R"({"a\"\\\/\b\f\n\r\t":"\u00e9\ud83d\ude00\u0000","é€😀":"x"})");
  put("json", "nested", R"({"a":[[[{"b":[1,[2,[3]]]}]]],"c":{"d":{"e":{}}}})");

  // idx: each element type, 1-3 dims, raw and gzip
  const std::string images = idx(0x08, {2, 3, 3}, bytes_of(18, 7));
  put("idx", "u8_images", images);
  put("idx", "u8_images.gz", gzip(images));
  put("idx", "u8_labels", idx(0x08, {5}, bytes_of(5)));
  put("idx", "i8", idx(0x09, {4}, bytes_of(4, 0x80)));
  put("idx", "i16", idx(0x0B, {2, 2}, bytes_of(8, 0xF0)));
  put("idx", "i32.gz", gzip(idx(0x0C, {3}, bytes_of(12, 0x11))));
  put("idx", "f32", idx(0x0D, {2}, std::string("\x3f\x80\x00\x00\x7f\xc0\x00\x00", 8)));
  put("idx", "f64", idx(0x0E, {1, 1}, std::string("\x40\x09\x21\xfb\x54\x44\x2d\x18", 8)));
  put("idx", "empty_dim", idx(0x08, {0, 4}, ""));

  // text: <context byte><stride byte><text>
  put("text", "ctx8_default", std::string("\x08\x00", 2) + "hello, world\n");
  put("text", "ctx4_stride1", std::string("\x04\x01", 2) + "abcdefgh");
  put("text", "ctx16_stride5", std::string("\x10\x05", 2) + kText);
  put("text", "gpt_sized", std::string("\x20\x00", 2) + kText + kText);

  // tfevents: a SummaryWriter's file, other fields and values, an empty file
  put("tfevents", "scalars", tfevents_written());
  put("tfevents", "other_fields", tfevents_other_fields());
  put("tfevents", "empty", "");

  // cli: argv, one argument per line
  put("cli", "train_full",
      "train\n--model\ngpt\n--precision=bf16\n--epochs\n3\n--batch-size\n16\n--lr\n3e-4\n"
      "--lr-schedule\nconstant\n--seed\n7\n--max-steps\n100\n--log-every\n5\n--no-progress");
  put("cli", "train_checkpoint",
      "train\n--checkpoint\n/tmp\n--checkpoint-every\n50\n--overwrite\n--resume\n/tmp\n"
      "--metrics\n/tmp/m.jsonl\n--summary-json\n/tmp/s.json\n--threads\n2");
  put("cli", "train_fp16", "train\n--precision\nfp16\n--no-scaler\n--data\n/nonexistent");
  put("cli", "bench",
      "bench\n--model\nmlp-large\n--precision\nbf16\n--batch-size\n256\n--steps\n50\n--warmup\n0\n"
      "--inference\n--json\n--profile\n--threads\n1");
  put("cli", "bench_budget", "bench\n--memory-budget\n256.5\n--max-batch-size\n4096\n--no-scaler");
  put("cli", "report",
      "report\n--model\nmlp\n--epochs\n1\n--max-steps\n10\n--bench-steps\n2\n--out\n/tmp/r\n--seed\n0");
  put("cli", "inspect", "inspect\n/tmp/ck");
  put("cli", "help", "train\n--help");
  std::printf("wrote seeds under %s\n", g_root.c_str());
  return 0;
}
