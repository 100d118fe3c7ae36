// The strict JSON reader behind safetensors headers (src/io/json.cpp): any bytes either
// parse or raise tc::Error. What parses must be valid UTF-8 in every string, and must
// survive a write/parse round trip unchanged.
#include <string_view>

#include "fuzz_util.h"
#include "io/json.h"

namespace json = tc::io::json;

namespace {

void write(const json::Value& v, std::string& out) {
  switch (v.kind) {
    case json::Value::Kind::Null:
      out += "null";
      break;
    case json::Value::Kind::Bool:
      out += v.boolean ? "true" : "false";
      break;
    case json::Value::Kind::Int:
      out += (v.negative ? "-" : "") + std::to_string(v.magnitude);
      break;
    case json::Value::Kind::String:
      json::append_string(out, v.string);
      break;
    case json::Value::Kind::Array:
      out += '[';
      for (size_t i = 0; i < v.array.size(); ++i) {
        if (i) out += ',';
        write(v.array[i], out);
      }
      out += ']';
      break;
    case json::Value::Kind::Object:
      out += '{';
      for (size_t i = 0; i < v.object.size(); ++i) {
        if (i) out += ',';
        json::append_string(out, v.object[i].first);
        out += ':';
        write(v.object[i].second, out);
      }
      out += '}';
      break;
  }
}

bool same(const json::Value& a, const json::Value& b) {
  if (a.kind != b.kind || a.boolean != b.boolean || a.string != b.string || a.array.size() != b.array.size() ||
      a.object.size() != b.object.size())
    return false;
  // "-0" reads as negative zero; it writes back as "-0" and reads the same.
  if (a.kind == json::Value::Kind::Int && (a.negative != b.negative || a.magnitude != b.magnitude)) return false;
  for (size_t i = 0; i < a.array.size(); ++i)
    if (!same(a.array[i], b.array[i])) return false;
  for (size_t i = 0; i < a.object.size(); ++i)
    if (a.object[i].first != b.object[i].first || !same(a.object[i].second, b.object[i].second)) return false;
  return true;
}

void check_strings(const json::Value& v) {
  if (!json::valid_utf8(v.string)) fuzz::broken("a parsed string is not UTF-8");
  for (const auto& e : v.array) check_strings(e);
  for (const auto& [k, e] : v.object) {
    if (!json::valid_utf8(k)) fuzz::broken("a parsed key is not UTF-8");
    check_strings(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  json::valid_utf8(text);
  fuzz::refused_or_ok([&] {
    const json::Value v = json::parse(text, "<fuzz>");
    check_strings(v);
    std::string again;
    write(v, again);
    if (!same(json::parse(again, "<fuzz round trip>"), v)) fuzz::broken("write/parse round trip changed the value");
  });
  return 0;
}
