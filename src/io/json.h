// Internal: the small, strict JSON reader and writer behind safetensors headers.
//
// Strict on purpose (the input is untrusted file content): UTF-8 is validated, duplicate
// object keys, floats, lone surrogates, control characters in strings, trailing garbage
// and nesting deeper than kMaxDepth are errors. Numbers are integers only (what the
// safetensors header holds). Errors are tc::Error "[io] <source>: invalid JSON header: ...".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tc::io::json {

inline constexpr int kMaxDepth = 64;

struct Value {
  // Defined below, once Value is complete: clang with libstdc++ would otherwise define the
  // implicit ones while std::pair<std::string, Value> is still incomplete, and fail.
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  enum class Kind { Null, Bool, Int, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  // An integer as sign and magnitude, so the caller can say "negative" rather than
  // "does not fit" and still read the whole u64 range.
  bool negative = false;
  uint64_t magnitude = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // in file order, keys unique

  const Value* find(std::string_view key) const;
};

inline Value::Value() = default;
inline Value::Value(const Value&) = default;
inline Value::Value(Value&&) noexcept = default;
inline Value& Value::operator=(const Value&) = default;
inline Value& Value::operator=(Value&&) noexcept = default;
inline Value::~Value() = default;

// With its article, for messages: "an array", "a string", "null".
std::string_view kind_name(Value::Kind kind);

// Parses one JSON value; only whitespace may follow it.
Value parse(std::string_view text, std::string_view source);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool valid_utf8(std::string_view text);

// Appends `s` as a JSON string literal (quotes included); `s` must be valid UTF-8.
void append_string(std::string& out, std::string_view s);

}  // namespace tc::io::json
