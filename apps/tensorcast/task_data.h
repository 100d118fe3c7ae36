// The training data of each model: Fashion-MNIST for cnn/mlp, a seeded synthetic
// classification task for mlp-large, a text file's bytes for gpt (the last 10% held out).
#pragma once
#include <tensorcast/data/dataset.h>

#include <cstdint>
#include <memory>
#include <string>

#include "settings.h"

namespace tcli {

struct TaskData {
  std::shared_ptr<const tc::data::Dataset> train, test;
  std::string description;  // one line: what was loaded from where
};

// `data` empty: the model's default (Fashion-MNIST's Debian location, the GPL-3 text for gpt).
// Problems throw tc::Error with one line saying what is wrong and what to do.
TaskData load_task_data(ModelKind model, const std::string& data, uint64_t seed);
std::string default_data_path(ModelKind model);

}  // namespace tcli
