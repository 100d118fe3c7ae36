// JSON writing (see json.h).
#include "json.h"

#include <tensorcast/error.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <system_error>

namespace tcli {

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

JsonObject& JsonObject::put(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_escape(key) + ": " + json;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::string& value) { return put(key, json_escape(value)); }
JsonObject& JsonObject::add(const std::string& key, double value) { return put(key, json_number(value)); }
JsonObject& JsonObject::add(const std::string& key, int64_t value) { return put(key, std::to_string(value)); }
JsonObject& JsonObject::add(const std::string& key, bool value) { return put(key, value ? "true" : "false"); }
JsonObject& JsonObject::add_raw(const std::string& key, const std::string& json) { return put(key, json); }

JsonLinesWriter::JsonLinesWriter(const std::filesystem::path& path, bool append) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_)
    throw tc::Error("[cli] cannot write " + path.string() + ": " + std::strerror(errno) +
                    " (check that the directory exists and is writable)");
}

JsonLinesWriter::~JsonLinesWriter() {
  if (file_) std::fclose(file_);
}

JsonLinesWriter& JsonLinesWriter::operator=(JsonLinesWriter&& o) noexcept {
  if (this != &o) {
    if (file_) std::fclose(file_);
    file_ = o.file_;
    o.file_ = nullptr;
  }
  return *this;
}

void JsonLinesWriter::write(const JsonObject& o) {
  if (!file_) return;
  const std::string line = o.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      throw tc::Error("[cli] cannot write " + path.string() + ": " + std::strerror(errno) +
                      " (check that the directory exists and is writable)");
    f << text;
    f.flush();
    if (!f) throw tc::Error("[cli] writing " + tmp.string() + " failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw tc::Error("[cli] cannot write " + path.string() + ": " + ec.message());
  }
}

}  // namespace tcli
