/// \file
/// Umbrella header: everything a user of tensorcast needs.
#pragma once
#include "tensorcast/allocator.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/amp/numerics.h"
#include "tensorcast/amp/policy.h"
#include "tensorcast/autograd.h"
#include "tensorcast/autograd_function.h"
#include "tensorcast/convert.h"
#include "tensorcast/cpu_features.h"
#include "tensorcast/cuda.h"
#include "tensorcast/data/data_loader.h"
#include "tensorcast/data/dataset.h"
#include "tensorcast/data/idx.h"
#include "tensorcast/data/mnist.h"
#include "tensorcast/data/text.h"
#include "tensorcast/device.h"
#include "tensorcast/dtype.h"
#include "tensorcast/error.h"
#include "tensorcast/float8.h"
#include "tensorcast/gemm16.h"
#include "tensorcast/half.h"
#include "tensorcast/inference_mode.h"
#include "tensorcast/io/checkpoint.h"
#include "tensorcast/io/describe.h"
#include "tensorcast/io/safetensors.h"
#include "tensorcast/io/summary_writer.h"
#include "tensorcast/nn/functional.h"
#include "tensorcast/nn/nn.h"
#include "tensorcast/ops.h"
#include "tensorcast/optim/adam.h"
#include "tensorcast/optim/adamw.h"
#include "tensorcast/optim/optimizer.h"
#include "tensorcast/optim/schedulers.h"
#include "tensorcast/optim/sgd.h"
#include "tensorcast/parallel.h"
#include "tensorcast/profiler.h"
#include "tensorcast/tensor.h"
#include "tensorcast/version.h"

/// \mainpage tensorcast
///
/// A C++20 engine for training neural networks in automatic mixed precision, with the API of
/// libtorch: include tensorcast/tensorcast.h (this header) and link `tensorcast::tensorcast`
/// (`tensorcast::dist` for data parallelism, `tensorcast::torch` for the libtorch adapter).
///
/// Where to start:
/// - tc::Tensor and the ops of tensorcast/ops.h (factories in tensorcast/factories.h);
/// - mixed precision: tc::amp::AutocastGuard and tc::amp::GradScaler;
/// - layers: tc::nn::Module, tc::nn::Sequential and the layers of tensorcast/nn/nn.h;
/// - optimizers: tc::optim::SGD, tc::optim::Adam, tc::optim::AdamW, tc::optim::LRScheduler;
/// - data and checkpoints: tc::data::DataLoader, tc::io::save_checkpoint;
/// - several processes: tc::dist::DistributedDataParallel;
/// - libtorch programs: tc::torch_amp::GradScaler and tc::torch_amp::AutocastGuard.
///
/// The guides are the repository's docs/ (docs/amp.md first); the README says how to build.
