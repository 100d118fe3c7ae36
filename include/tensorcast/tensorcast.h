// Umbrella header: everything a user of tensorcast needs.
#pragma once
#include "tensorcast/allocator.h"
#include "tensorcast/autograd.h"
#include "tensorcast/convert.h"
#include "tensorcast/device.h"
#include "tensorcast/dtype.h"
#include "tensorcast/error.h"
#include "tensorcast/half.h"
#include "tensorcast/nn/functional.h"
#include "tensorcast/ops.h"
#include "tensorcast/parallel.h"
#include "tensorcast/tensor.h"
#include "tensorcast/version.h"
