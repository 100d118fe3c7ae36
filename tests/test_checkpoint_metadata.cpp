// A checkpoint with a metadata key missing or damaged is refused by load_checkpoint and
// describe (`tensorcast inspect`) with a tc::Error naming the file and the key, never a
// standard exception such as std::out_of_range from map::at.
#include <filesystem>
#include <set>
#include <string>

#include "common/testing.h"

namespace fs = std::filesystem;
using tc::testing::TempDir;
using tc::testing::throws_with;

namespace {

// The keys every checkpoint carries; the free-form run description ("precision", ...) is
// optional.
const std::set<std::string> kRequiredKeys = {"format", "format_version", "epoch", "step", "tensorcast_version"};

tc::io::TrainingState small_state() {
  tc::io::TrainingState s;
  s.model = {{"0.weight", tc::ones({2, 3})}};
  s.optimizer = {{"state.0.step", tc::state_int(3)}};
  s.data_loader = {{"epoch", tc::state_int(1)}};
  s.epoch = 1;
  s.step = 3;
  s.metadata = {{"precision", "bf16"}, {"model", "mlp"}};
  return s;
}

// `what` throws a tc::Error that names `file` and the key, quoted as the messages quote it.
::testing::AssertionResult names_file_and_key(const std::function<void()>& what, const fs::path& file,
                                              const std::string& key) {
  return throws_with(what, {"[io] ", file.string() + ": ", "'" + key + "'"});
}

}  // namespace

TEST(CheckpointMetadata, EachMissingKeyIsAnErrorNamingTheFileAndTheKey) {
  TempDir dir("ckmeta");
  tc::io::save_checkpoint(dir.path / "good", small_state());
  const tc::io::SafetensorsFile good = tc::io::load_safetensors(dir.path / "good" / tc::io::kCheckpointFileName);
  std::set<std::string> required_seen;
  for (const auto& [key, value] : good.metadata) {
    tc::io::Metadata meta = good.metadata;
    meta.erase(key);
    // The file on its own, and as the checkpoint file of a directory.
    const fs::path file = dir.path / ("without_" + key + ".safetensors");
    const fs::path ck = dir.path / ("without_" + key);
    const fs::path ck_file = ck / tc::io::kCheckpointFileName;
    fs::create_directory(ck);
    tc::io::save_safetensors(file, good.tensors, meta);
    tc::io::save_safetensors(ck_file, good.tensors, meta);
    if (!kRequiredKeys.count(key)) {  // optional: the checkpoint still loads and lists
      EXPECT_EQ(tc::io::load_checkpoint(ck).metadata.count(key), 0u) << key;
      EXPECT_EQ(tc::io::describe(file).find("  " + key + " = "), std::string::npos) << key;
      continue;
    }
    required_seen.insert(key);
    EXPECT_TRUE(names_file_and_key([&] { tc::io::describe(file); }, file, key)) << "describe(file) without " << key;
    EXPECT_TRUE(names_file_and_key([&] { tc::io::describe(ck); }, ck_file, key)) << "describe(dir) without " << key;
    EXPECT_TRUE(names_file_and_key([&] { tc::io::load_checkpoint(file); }, file, key)) << "load(file) without " << key;
    EXPECT_TRUE(names_file_and_key([&] { tc::io::load_checkpoint(ck); }, ck_file, key)) << "load(dir) without " << key;
  }
  EXPECT_EQ(required_seen, kRequiredKeys) << "a checkpoint no longer holds every required key";
}

TEST(CheckpointMetadata, MessagesSayWhatIsMissing) {
  TempDir dir("ckmeta");
  tc::io::save_checkpoint(dir.path, small_state());
  const fs::path file = dir.path / tc::io::kCheckpointFileName;
  tc::io::SafetensorsFile f = tc::io::load_safetensors(file);
  f.metadata.erase("tensorcast_version");
  tc::io::save_safetensors(file, f.tensors, f.metadata);
  EXPECT_TRUE(throws_with([&] { tc::io::describe(dir.path); },
                          {"[io] " + file.string() + ": checkpoint metadata lacks 'tensorcast_version'"}));
  f.metadata.erase("format");
  tc::io::save_safetensors(file, f.tensors, f.metadata);
  EXPECT_TRUE(
      throws_with([&] { tc::io::describe(file); },
                  {"[io] " + file.string() + ": not a tensorcast training checkpoint (its metadata lacks 'format')"}));
}

TEST(CheckpointMetadata, DamagedValuesNameTheKey) {
  TempDir dir("ckmeta");
  tc::io::save_checkpoint(dir.path, small_state());
  const fs::path file = dir.path / tc::io::kCheckpointFileName;
  const tc::io::SafetensorsFile good = tc::io::load_safetensors(file);
  for (const char* key : {"format_version", "epoch", "step"}) {
    for (const char* bad : {"", "x", "1x", " 1", "99999999999999999999"}) {
      tc::io::Metadata meta = good.metadata;
      meta[key] = bad;
      tc::io::save_safetensors(file, good.tensors, meta);
      EXPECT_TRUE(
          throws_with([&] { tc::io::describe(file); }, {"[io] " + file.string() + ": ", std::string("'") + key + "'"}))
          << key << " = \"" << bad << "\"";
      EXPECT_TRUE(
          throws_with([&] { tc::io::load_checkpoint(dir.path); }, {file.string(), std::string("'") + key + "'"}))
          << key << " = \"" << bad << "\"";
    }
  }
}

TEST(CheckpointMetadata, PlainFilesAreNotTakenForDamagedCheckpoints) {
  TempDir dir("ckmeta");
  // The trainer's model.safetensors has "step" in its metadata; other writers use "format".
  const tc::io::Metadata plain[] = {{}, {{"model", "mlp"}, {"step", "3"}}, {{"format", "pt"}}, {{"epoch", "x"}}};
  for (const auto& meta : plain) {
    const fs::path file = dir.path / "weights.safetensors";
    tc::io::save_safetensors(file, {{"w", tc::ones({2})}}, meta);
    std::string text;
    EXPECT_NO_THROW(text = tc::io::describe(file));
    EXPECT_EQ(text.find("training checkpoint"), std::string::npos) << text;
  }
  EXPECT_FALSE(tc::io::claims_checkpoint({{"format", "pt"}, {"format_version", "1"}}));
  EXPECT_TRUE(tc::io::claims_checkpoint({{"tensorcast_version", "0.1"}}));
  EXPECT_TRUE(tc::io::claims_checkpoint({{"format_version", "1"}}));
  EXPECT_TRUE(tc::io::claims_checkpoint({{"format", "tensorcast.checkpoint"}}));
}
