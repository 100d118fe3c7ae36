// Training checkpoints applied as `tensorcast train --resume` applies them: the bytes are
// a checkpoint.safetensors (load_checkpoint = parse_safetensors + training_state_from),
// restored into a freshly built run by the CLI's own restore_training_state (model,
// optimizer, scaler, loader, generator, LR schedule), which then trains one step,
// so state that loads but cannot be used is found too. Tensors named "lr_scheduler.*"
// go to LRScheduler::load_state_dict as well (the CLI derives its schedule from the step;
// a library user may checkpoint a scheduler's state dict). Metadata picks what the CLI
// would: precision fp16 with scaler != 0 uses the GradScaler; "optimizer" (adamw, adam,
// sgd) is ours. The same bytes also go through describe(), what `tensorcast inspect FILE`
// prints. Inputs are mutated structurally (safetensors_mutator.h).
#include <tensorcast/io/checkpoint.h>
#include <tensorcast/io/describe.h>
#include <tensorcast/io/safetensors.h>

#include "fuzz_util.h"
#include "safetensors_mutator.h"
#include "tiny_run.h"
#include "trainer.h"

namespace {

std::string meta(const tc::io::TrainingState& s, const char* key) {
  const auto it = s.metadata.find(key);
  return it == s.metadata.end() ? "" : it->second;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tc::set_num_threads(1);  // tiny tensors: threads only add noise to coverage and timing
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::refused_or_ok([&] { tc::io::describe(fuzz::write_scratch("checkpoint.safetensors", data, size)); });
  fuzz::refused_or_ok([&] {
    tc::io::SafetensorsFile file =
        tc::io::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "<fuzz>");
    tc::StateDict scheduler_state;
    for (auto it = file.tensors.begin(); it != file.tensors.end();) {
      if (it->first.rfind("lr_scheduler.", 0) == 0) {
        scheduler_state.emplace(it->first.substr(13), it->second);
        it = file.tensors.erase(it);
      } else {
        ++it;
      }
    }
    const tc::io::TrainingState state = tc::io::training_state_from(file, "<fuzz>");

    tc::manual_seed(0);
    const bool use_scaler = meta(state, "precision") == "fp16" && meta(state, "scaler") != "0";
    fuzz::TinyRun run(meta(state, "optimizer"), use_scaler);
    tcli::restore_training_state(state, *run.model, *run.optimizer, run.scaler, use_scaler, run.loader,
                                 run.scheduler.get());
    if (!scheduler_state.empty()) run.scheduler->load_state_dict(scheduler_state);
    run.train_step();
  });
  return 0;
}

TC_FUZZ_SAFETENSORS_MUTATOR()
