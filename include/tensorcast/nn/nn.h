/// \file
/// Every module of tc::nn (the umbrella tensorcast/tensorcast.h includes this).
#pragma once
#include "tensorcast/nn/activation.h"
#include "tensorcast/nn/attention.h"
#include "tensorcast/nn/container.h"
#include "tensorcast/nn/conv.h"
#include "tensorcast/nn/dropout.h"
#include "tensorcast/nn/embedding.h"
#include "tensorcast/nn/functional.h"
#include "tensorcast/nn/gpt.h"
#include "tensorcast/nn/init.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/nn/module.h"
#include "tensorcast/nn/normalization.h"
#include "tensorcast/nn/pooling.h"
#include "tensorcast/nn/utils.h"
