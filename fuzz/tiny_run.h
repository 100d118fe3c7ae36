// A training run small enough to rebuild on every fuzz input: the same kinds of state as
// `tensorcast train` (a module with parameters and buffers, an optimizer with two
// parameter groups, a GradScaler, a shuffling DataLoader, a cosine LR schedule), a few
// hundred bytes of it. fuzz_checkpoint restores checkpoints into it; fuzz_make_corpus
// saves its seeds from it, so the seeds fit it.
#pragma once
#include <tensorcast/amp/grad_scaler.h>
#include <tensorcast/data/data_loader.h>
#include <tensorcast/io/checkpoint.h>
#include <tensorcast/nn/nn.h>
#include <tensorcast/ops.h>
#include <tensorcast/optim/adam.h>
#include <tensorcast/optim/adamw.h>
#include <tensorcast/optim/schedulers.h>
#include <tensorcast/optim/sgd.h>

#include <memory>
#include <string>
#include <vector>

namespace fuzz {

struct TinyRun {
  static constexpr int64_t kExamples = 10, kBatch = 3, kEpochs = 2;

  tc::nn::Sequential model;
  std::unique_ptr<tc::optim::Optimizer> optimizer;
  tc::amp::GradScaler scaler;
  tc::data::DataLoader loader;
  std::unique_ptr<tc::optim::CosineAnnealingLR> scheduler;

  // `optimizer_name`: adamw (what the CLI uses), adam or sgd.
  TinyRun(const std::string& optimizer_name, bool use_scaler)
      : model(tc::nn::BatchNorm2d(2), tc::nn::Flatten(), tc::nn::Linear(8, 3), tc::nn::ReLU(), tc::nn::Linear(3, 2)),
        scaler(tc::amp::GradScalerOptions().enabled(use_scaler)),
        loader(tc::data::TensorDataset(tc::randn({kExamples, 2, 2, 2}), tc::randint(0, 2, {kExamples})),
               tc::data::DataLoaderOptions(kBatch).shuffle(true).seed(7).prefetch(0)) {
    const auto params = model->parameters();
    std::vector<tc::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<tc::Tensor>(params.begin(), params.begin() + 4));
    groups.emplace_back(std::vector<tc::Tensor>(params.begin() + 4, params.end()));
    if (optimizer_name == "sgd")
      optimizer = std::make_unique<tc::optim::SGD>(std::move(groups), tc::optim::SGDOptions(0.1).momentum(0.9));
    else if (optimizer_name == "adam")
      optimizer = std::make_unique<tc::optim::Adam>(std::move(groups), tc::optim::AdamOptions(1e-3));
    else
      optimizer =
          std::make_unique<tc::optim::AdamW>(std::move(groups), tc::optim::AdamWOptions(1e-3).weight_decay(0.0));
    scheduler = std::make_unique<tc::optim::CosineAnnealingLR>(*optimizer, kEpochs * loader.size());
  }

  // One step of the CLI's loop on the loader's next batch (a new epoch when one ended).
  void train_step() {
    auto it = loader.begin();
    if (it == loader.end()) {
      loader.set_epoch(loader.epoch() + 1);
      it = loader.begin();
    }
    optimizer->zero_grad(true);
    const tc::Tensor loss = tc::nn::functional::cross_entropy(model->forward(it->data), it->target);
    scaler.scale(loss).backward();
    scaler.step(*optimizer);
    scaler.update();
    scheduler->step();
  }
};

}  // namespace fuzz
