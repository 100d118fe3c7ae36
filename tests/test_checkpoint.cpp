// Training checkpoints and the generator state: a round trip restores every field, the
// RNG resumes the same draws, and a damaged checkpoint is refused without side effects.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/testing.h"
#include "io/atomic_file.h"

namespace fs = std::filesystem;
using tc::testing::TempDir;
using tc::testing::throws_with;

namespace {

bool same_dict(const tc::StateDict& a, const tc::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second.dtype() != t.dtype() || it->second.sizes() != t.sizes()) return false;
    const auto x = t.contiguous(), y = it->second.contiguous();
    if (std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0) return false;
  }
  return true;
}

tc::io::TrainingState sample_state() {
  tc::manual_seed(11);
  tc::io::TrainingState s;
  s.model = {{"0.weight", tc::randn({4, 3})},
             {"0.bias", tc::randn({4}).to(tc::kBFloat16)},
             {"bn.num_batches_tracked", tc::state_int(9)}};
  s.optimizer = {{"param_groups.0.lr", tc::state_scalar(1e-3)},
                 {"state.0.exp_avg", tc::randn({4, 3})},
                 {"state.0.step", tc::state_int(41)}};
  s.scaler = {{"scale", tc::state_scalar(65536.0)}, {"growth_tracker", tc::state_int(17)}};
  s.data_loader = {{"epoch", tc::state_int(2)}, {"position", tc::state_int(384)}, {"permutation", tc::randperm(10)}};
  s.rng = tc::get_rng_state();
  s.epoch = 2;
  s.step = 1234;
  s.metadata = {{"precision", "fp16"}, {"model", "cnn"}, {"seed", "11"}};
  return s;
}

}  // namespace

TEST(RngState, RestoringTheStateRepeatsTheDraws) {
  tc::manual_seed(123);
  tc::rand({7});  // advance somewhere arbitrary
  const tc::Tensor state = tc::get_rng_state();
  EXPECT_EQ(state.dtype(), tc::kUInt8);
  const auto a1 = tc::rand({100}), b1 = tc::randn({33}), c1 = tc::randint(0, 1000, {50}), d1 = tc::randperm(20);
  tc::manual_seed(999);  // anything in between
  tc::randn({5});
  tc::set_rng_state(state);
  const auto a2 = tc::rand({100}), b2 = tc::randn({33}), c2 = tc::randint(0, 1000, {50}), d2 = tc::randperm(20);
  EXPECT_TRUE(tc::testing::equal(a2, a1));
  EXPECT_TRUE(tc::testing::equal(b2, b1));
  EXPECT_TRUE(tc::testing::equal(c2, c1));
  EXPECT_TRUE(tc::testing::equal(d2, d1));
  EXPECT_TRUE(tc::testing::equal(tc::get_rng_state(), tc::get_rng_state()));
}

TEST(RngState, RejectsWhatIsNotAState) {
  const tc::Tensor before = tc::get_rng_state();
  EXPECT_TRUE(throws_with([] { tc::set_rng_state(tc::ones({4})); }, {"[rng]", "uint8"}));
  EXPECT_TRUE(throws_with([] { tc::set_rng_state(tc::zeros({10}, tc::kUInt8)); }, {"[rng]", "not a generator state"}));
  tc::Tensor truncated = before.slice(0, 0, before.numel() / 2).clone();
  EXPECT_TRUE(throws_with([&] { tc::set_rng_state(truncated); }, {"[rng]", "not a generator state"}));
  EXPECT_TRUE(tc::testing::equal(tc::get_rng_state(), before)) << "a refused state must not change the generator";
}

TEST(Checkpoint, RoundTripRestoresEveryField) {
  TempDir dir("checkpoint");
  const auto s = sample_state();
  tc::io::save_checkpoint(dir.path / "run", s);
  EXPECT_TRUE(tc::io::has_checkpoint(dir.path / "run"));
  const auto r = tc::io::load_checkpoint(dir.path / "run");
  EXPECT_TRUE(same_dict(r.model, s.model));
  EXPECT_TRUE(same_dict(r.optimizer, s.optimizer));
  EXPECT_TRUE(same_dict(r.scaler, s.scaler));
  EXPECT_TRUE(same_dict(r.data_loader, s.data_loader));
  ASSERT_TRUE(r.rng.defined());
  EXPECT_TRUE(tc::testing::equal(r.rng, s.rng));
  EXPECT_EQ(r.epoch, 2);
  EXPECT_EQ(r.step, 1234);
  EXPECT_EQ(r.metadata, s.metadata);

  // The restored generator continues exactly where the saved one was.
  tc::set_rng_state(s.rng);
  const auto expected = tc::randn({16});
  tc::manual_seed(0);
  tc::set_rng_state(r.rng);
  EXPECT_TRUE(tc::testing::equal(tc::randn({16}), expected));

  // The file is plain safetensors with prefixed names and the run in its metadata.
  const auto raw = tc::io::load_safetensors(dir.path / "run" / tc::io::kCheckpointFileName);
  EXPECT_TRUE(raw.tensors.count("model.0.weight"));
  EXPECT_TRUE(raw.tensors.count("optim.state.0.step"));
  EXPECT_TRUE(raw.tensors.count("scaler.scale"));
  EXPECT_TRUE(raw.tensors.count("loader.position"));
  EXPECT_TRUE(raw.tensors.count("rng.cpu"));
  EXPECT_EQ(raw.metadata.at("step"), "1234");
  EXPECT_EQ(raw.metadata.at("format"), "tensorcast.checkpoint");
  EXPECT_EQ(raw.metadata.at("precision"), "fp16");
}

TEST(Checkpoint, EmptyPartsAndNoRng) {
  TempDir dir("checkpoint");
  tc::io::TrainingState s;
  s.model = {{"w", tc::ones({2})}};
  tc::io::save_checkpoint(dir.path, s);
  const auto r = tc::io::load_checkpoint(dir.path / tc::io::kCheckpointFileName);  // the file itself works too
  EXPECT_TRUE(same_dict(r.model, s.model));
  EXPECT_TRUE(r.optimizer.empty() && r.scaler.empty() && r.data_loader.empty());
  EXPECT_FALSE(r.rng.defined());
  EXPECT_EQ(r.step, 0);
}

TEST(Checkpoint, KeepsThePreviousCheckpoint) {
  TempDir dir("checkpoint");
  auto s = sample_state();
  tc::io::save_checkpoint(dir.path, s);
  s.step = 2000;
  tc::io::save_checkpoint(dir.path, s);
  EXPECT_EQ(tc::io::load_checkpoint(dir.path).step, 2000);
  EXPECT_EQ(tc::io::load_checkpoint(dir.path / tc::io::kPreviousCheckpointFileName).step, 1234);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint.prev.safetensors", "checkpoint.safetensors"}));
}

TEST(Checkpoint, CrashDuringSaveLeavesTheCheckpointIntact) {
  TempDir dir("checkpoint");
  auto s = sample_state();
  tc::io::save_checkpoint(dir.path, s);
  s.model["big"] = tc::rand({1 << 20});
  s.step = 5000;
  tc::io::set_atomic_write_hook([](size_t written) {
    if (written >= (1u << 20)) throw std::runtime_error("simulated crash");
  });
  EXPECT_THROW(tc::io::save_checkpoint(dir.path, s), std::runtime_error);
  tc::io::set_atomic_write_hook({});
  EXPECT_EQ(tc::io::load_checkpoint(dir.path).step, 1234);
}

TEST(Checkpoint, TruncatedCheckpointIsRejectedAndChangesNothing) {
  TempDir dir("checkpoint");
  const auto s = sample_state();
  tc::io::save_checkpoint(dir.path, s);
  const auto file = dir.path / tc::io::kCheckpointFileName;
  const auto size = fs::file_size(file);
  fs::resize_file(file, size - 5);

  tc::manual_seed(77);
  const tc::Tensor rng_before = tc::get_rng_state();
  tc::io::TrainingState held = sample_state();
  tc::set_rng_state(rng_before);
  const tc::io::TrainingState copy = held;
  EXPECT_TRUE(
      throws_with([&] { held = tc::io::load_checkpoint(dir.path); }, {"[io]", "checkpoint.safetensors", "truncated"}));
  EXPECT_TRUE(tc::testing::equal(tc::get_rng_state(), rng_before));
  EXPECT_TRUE(same_dict(held.model, copy.model));
  EXPECT_EQ(held.step, copy.step);

  fs::resize_file(file, 3);
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(dir.path); }, {"[io]", "too short"}));
}

TEST(Checkpoint, RefusesForeignAndInconsistentFiles) {
  TempDir dir("checkpoint");
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(dir.path); }, {"[io]", "no checkpoint at"}));
  EXPECT_FALSE(tc::io::has_checkpoint(dir.path));

  tc::io::save_safetensors(dir.path / "weights.safetensors", {{"w", tc::ones({2})}});
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(dir.path / "weights.safetensors"); },
                          {"[io]", "not a tensorcast training checkpoint"}));

  const tc::io::Metadata meta = {{"format", "tensorcast.checkpoint"},
                                 {"format_version", "1"},
                                 {"epoch", "0"},
                                 {"step", "x"},
                                 {"tensorcast_version", "0"}};
  tc::io::save_safetensors(dir.path / "a.safetensors", {}, meta);
  EXPECT_TRUE(
      throws_with([&] { tc::io::load_checkpoint(dir.path / "a.safetensors"); }, {"[io]", "'step'", "not an integer"}));

  auto m2 = meta;
  m2["step"] = "1";
  m2["format_version"] = "99";
  tc::io::save_safetensors(dir.path / "b.safetensors", {}, m2);
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(dir.path / "b.safetensors"); }, {"[io]", "format version 99"}));

  m2["format_version"] = "1";
  tc::io::save_safetensors(dir.path / "c.safetensors", {{"stray", tc::ones({1})}}, m2);
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(dir.path / "c.safetensors"); },
                          {"[io]", "'stray' belongs to no part"}));

  tc::io::TrainingState s;
  s.metadata = {{"step", "3"}};
  EXPECT_TRUE(throws_with([&] { tc::io::save_checkpoint(dir.path / "d", s); }, {"[io]", "'step' is reserved"}));
  EXPECT_FALSE(fs::exists(dir.path / "d"));
}

TEST(Checkpoint, NextSaveRemovesWhatKilledSavesLeftBehind) {
  TempDir d("checkpoint");
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string me = std::to_string(::getpid()), gone = std::to_string(dead);
  auto touch = [&](const std::string& name) {
    std::FILE* f = std::fopen((d.path / name).c_str(), "w");
    std::fclose(f);
  };
  const std::vector<std::string> stale = {".checkpoint.safetensors.tmp-" + gone + "-0-123",
                                          ".model.safetensors.tmp-" + gone + "-41-7"};
  const std::vector<std::string> kept = {
      ".checkpoint.safetensors.tmp-" + me + "-0-1",   // this process: another thread may be saving
      ".checkpoint.safetensors.tmp-1-0-1",            // pid 1 is alive
      "checkpoint.safetensors.tmp-" + gone + "-0-1",  // not hidden: not a name AtomicFile makes
      ".x.tmp-" + gone + "-0",                        // two fields only
      ".x.tmp-" + gone + "-0-1z",                     // not digits
      ".x.tmp-99999999999999999999999-0-1",           // a pid past any integer type
      "notes.txt"};
  for (const auto& n : stale) touch(n);
  for (const auto& n : kept) touch(n);
  tc::io::save_checkpoint(d.path, sample_state());
  for (const auto& n : stale) EXPECT_FALSE(fs::exists(d.path / n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(d.path / n)) << n;
  EXPECT_TRUE(same_dict(tc::io::load_checkpoint(d.path).model, sample_state().model));
  EXPECT_EQ(tc::io::remove_stale_temp_files(d.path), 0u);
}

TEST(Checkpoint, AFifoIsRefusedWithoutBlocking) {
  // Opening a FIFO for reading would wait for a writer forever.
  TempDir d("checkpoint");
  const fs::path fifo = d.path / "checkpoint.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(throws_with([&] { tc::io::load_checkpoint(d.path); }, {"[io] cannot read", "it is a FIFO"}));
  EXPECT_TRUE(throws_with([&] { tc::io::load_safetensors(fifo); }, {"it is a FIFO"}));
  EXPECT_TRUE(throws_with([&] { tc::io::load_safetensors(d.path); }, {"it is a directory"}));
}

TEST(Describe, ListsTensorsAndTrainingState) {
  TempDir dir("checkpoint");
  tc::io::save_checkpoint(dir.path, sample_state());
  const std::string text = tc::io::describe(dir.path);
  for (const char* part : {"training checkpoint: epoch 2, step 1234", "model.0.weight", "BF16", "(4, 3)",
                           "precision = fp16", "rng.cpu", "optimizer   3 tensors"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing from:\n" << text;
  // Sorted by name.
  EXPECT_LT(text.find("loader.epoch"), text.find("model.0.bias"));

  tc::io::save_safetensors(dir.path / "w.safetensors", {{"b", tc::zeros({3}, tc::kInt64)}, {"a", tc::ones({2, 2})}});
  const std::string plain = tc::io::describe(dir.path / "w.safetensors");
  EXPECT_EQ(plain.find("training checkpoint"), std::string::npos);
  EXPECT_NE(plain.find("2 tensors"), std::string::npos) << plain;
  EXPECT_LT(plain.find("  a "), plain.find("  b ")) << plain;
  EXPECT_TRUE(throws_with([&] { tc::io::describe(dir.path / "missing.safetensors"); }, {"[io]", "cannot open"}));
}
