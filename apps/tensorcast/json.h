// Writing JSON objects and JSON Lines (metrics, summaries, bench results). Tiny on purpose:
// the CLI only writes flat objects of strings, numbers and booleans.
//
//   tcli::JsonObject o;
//   o.add("model", "cnn").add("steps", 469).add("test_accuracy", 0.912);
//   std::string line = o.str();        // {"model": "cnn", "steps": 469, "test_accuracy": 0.912}
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace tcli {

std::string json_escape(const std::string& s);  // with the surrounding quotes
std::string json_number(double v);              // shortest round-trip form; null for NaN/inf

class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, int64_t(value)); }
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add_raw(const std::string& key, const std::string& json);  // a nested value
  std::string str() const { return "{" + body_ + "}"; }
  bool empty() const { return body_.empty(); }

 private:
  JsonObject& put(const std::string& key, const std::string& json);
  std::string body_;
};

// Appends one object per line to a file, flushed per line so `tail -f` follows a run.
class JsonLinesWriter {
 public:
  JsonLinesWriter() = default;
  // Truncates the file, or appends to it (resumed runs). Throws tc::Error on failure.
  JsonLinesWriter(const std::filesystem::path& path, bool append);
  ~JsonLinesWriter();
  JsonLinesWriter(const JsonLinesWriter&) = delete;
  JsonLinesWriter& operator=(const JsonLinesWriter&) = delete;
  JsonLinesWriter(JsonLinesWriter&& o) noexcept : file_(o.file_) { o.file_ = nullptr; }
  JsonLinesWriter& operator=(JsonLinesWriter&& o) noexcept;

  bool is_open() const { return file_ != nullptr; }
  void write(const JsonObject& o);

 private:
  std::FILE* file_ = nullptr;
};

// Writes `text` to `path` atomically (temporary file in the same directory, then rename),
// so a failing run never leaves a half-written file in place of a good one.
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace tcli
