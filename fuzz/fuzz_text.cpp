// Text datasets (src/data/text.cpp) and the CLI's `--model gpt --data FILE` loader
// (apps/tensorcast/task_data.cpp). Input: byte 0 is the context, byte 1 the stride (0:
// the default), both as signed bytes so bad values are tried too; the rest is the text
// file. Every window read back must hold the file's bytes at the right offsets.
#include <tensorcast/data/text.h>

#include <cstring>

#include "fuzz_util.h"
#include "task_data.h"

namespace {

void check_window(const tc::data::TextDataset& ds, const uint8_t* text, int64_t i, const tc::data::Example& ex) {
  const int64_t* x = ex.data.data_ptr<int64_t>();
  const int64_t* y = ex.target.data_ptr<int64_t>();
  for (int64_t j = 0; j < ds.context(); ++j)
    if (x[j] != text[i * ds.stride() + j] || y[j] != text[i * ds.stride() + j + 1])
      fuzz::broken("a window does not hold the file's bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t context = static_cast<int8_t>(data[0]);
  const std::optional<int64_t> stride = data[1] ? std::optional<int64_t>(static_cast<int8_t>(data[1])) : std::nullopt;
  const uint8_t* text = data + 2;
  const std::string path = fuzz::write_scratch("text", text, size - 2);
  fuzz::refused_or_ok([&] {
    const tc::data::TextDataset ds(path, context, stride);
    const int64_t n = ds.size();
    if (n < 1 || ds.bytes().numel() != static_cast<int64_t>(size - 2)) fuzz::broken("wrong size or byte count");
    check_window(ds, text, 0, ds.get(0));
    check_window(ds, text, n - 1, ds.get(n - 1));
    const int64_t idx[] = {n - 1, 0, n / 2};
    const auto batch = ds.get_batch(idx);
    for (int k = 0; k < 3; ++k) check_window(ds, text, idx[k], {batch.data.select(0, k), batch.target.select(0, k)});
    bool refused = false;
    try {
      ds.get(n);
    } catch (const tc::Error&) {
      refused = true;
    } catch (...) {
      fuzz::escaped();
    }
    if (!refused) fuzz::broken("get(size()) was not refused");
  });
  fuzz::refused_or_ok([&] {
    const tcli::TaskData t = tcli::load_task_data(tcli::ModelKind::kGpt, path, 0);
    t.train->get(t.train->size() - 1);
    t.test->get(0);
  });
  return 0;
}
