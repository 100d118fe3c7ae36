// The strict JSON reader/writer for safetensors headers (see json.h for what is refused).
#include "io/json.h"

#include "tensorcast/error.h"

namespace tc::io::json {

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
}

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "a boolean";
    case Value::Kind::Int:
      return "an integer";
    case Value::Kind::String:
      return "a string";
    case Value::Kind::Array:
      return "an array";
    case Value::Kind::Object:
      return "an object";
  }
  return "?";
}

bool valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
      min = 0x10000;
    } else
      return false;
    if (end - p < len) return false;
    for (int i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += len;
  }
  return true;
}

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Value parse_document() {
    if (!valid_utf8(text_)) fail("not valid UTF-8");
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("unexpected '", text_[pos_], "' after the end of the value");
    return v;
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... what) const {
    TC_FAIL("io", source_, ": invalid JSON header at byte ", pos_, ": ", what...);
  }

  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void expect_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("unexpected character '", peek(), "'");
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than ", kMaxDepth, " levels");
    skip_ws();
    if (at_end()) fail("unexpected end of input");
    Value v;
    const char c = peek();
    if (c == '{') {
      v.kind = Value::Kind::Object;
      parse_object(v, depth);
    } else if (c == '[') {
      v.kind = Value::Kind::Array;
      parse_array(v, depth);
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.string = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::Int;
      parse_integer(v);
    } else if (c == 't') {
      expect_word("true");
      v.kind = Value::Kind::Bool;
      v.boolean = true;
    } else if (c == 'f') {
      expect_word("false");
      v.kind = Value::Kind::Bool;
    } else if (c == 'n') {
      expect_word("null");
    } else {
      fail("unexpected character '", c, "'");
    }
    return v;
  }

  void parse_object(Value& v, int depth) {
    ++pos_;  // '{'
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      if (at_end() || peek() != '"') fail("expected a string key");
      std::string key = parse_string();
      if (v.find(key)) fail("duplicate key \"", key, "\"");
      skip_ws();
      if (at_end() || peek() != ':') fail("expected ':' after key \"", key, "\"");
      ++pos_;
      Value item = parse_value(depth + 1);
      v.object.emplace_back(std::move(key), std::move(item));
      skip_ws();
      if (at_end()) fail("unterminated object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return;
      }
      fail("expected ',' or '}' in object");
    }
  }

  void parse_array(Value& v, int depth) {
    ++pos_;  // '['
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      v.array.push_back(parse_value(depth + 1));
      skip_ws();
      if (at_end()) fail("unterminated array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return;
      }
      fail("expected ',' or ']' in array");
    }
  }

  void parse_integer(Value& v) {
    if (peek() == '-') {
      v.negative = true;
      ++pos_;
    }
    const size_t start = pos_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const uint64_t d = static_cast<uint64_t>(peek() - '0');
      if (v.magnitude > (UINT64_MAX - d) / 10) fail("integer does not fit in 64 bits");
      v.magnitude = v.magnitude * 10 + d;
      ++pos_;
    }
    if (pos_ == start) fail("expected a digit");
    if (text_[start] == '0' && pos_ - start > 1) fail("integer with a leading zero");
    if (!at_end() && (peek() == '.' || peek() == 'e' || peek() == 'E'))
      fail("non-integer numbers are not used in safetensors headers");
  }

  uint32_t parse_hex4() {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        cp |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        cp |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return cp;
  }

  std::string parse_string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") fail("high surrogate without its low half");
            pos_ += 2;
            const uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("unknown escape '\\", e, "'");
      }
    }
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view source) { return Parser(text, source).parse_document(); }

void append_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
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
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace tc::io::json
