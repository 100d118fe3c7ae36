// Internal: a cached, ready-to-run oneDNN primitive together with the reorders between
// the caller's strided tensors and the (often blocked) layouts the primitive chose.
//
// Conv and pooling build a Plan once per (op, shapes, strides, dtypes, params) key and keep
// it in a thread-safe cache, because creating primitives and reorders costs far more than
// running them on small batches.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/onednn/context.h"

namespace tc::cpu {

struct PlanArg {
  int id = 0;               // DNNL_ARG_*
  dnnl::memory::desc user;  // the tc tensor as it is
  dnnl::memory::desc prim;  // what the primitive wants
  dnnl::reorder reorder;    // user -> prim (inputs) or prim -> user (outputs); empty if equal
  bool output = false;
  bool needs_reorder() const { return static_cast<bool>(reorder); }
};

struct Plan {
  dnnl::primitive prim;
  std::vector<PlanArg> args;
  std::string impl;  // oneDNN's implementation name, for logs and tests
};

// An argument of `plan`, adding the reorder when the layouts differ.
PlanArg plan_arg(int id, const dnnl::memory::desc& user, const dnnl::memory::desc& prim, bool output);

// The plan for `key`, built by `build` on first use. `build` returns nullptr when oneDNN
// has no suitable implementation (e.g. float16 on a CPU without fp16 math); that answer is
// cached too, so callers can fall back without retrying primitive creation.
std::shared_ptr<const Plan> cached_plan(const std::string& key, const std::function<std::shared_ptr<Plan>()>& build);

// Runs `plan` with one tensor per argument (same order as plan.args): reorders inputs into
// scratch buffers when needed, executes, reorders outputs back, and waits.
void run_plan(const Plan& plan, const std::vector<Tensor>& tensors);

// Appends dims to a cache key.
void key_append(std::string& key, const Shape& v);
void key_append(std::string& key, int64_t v);

// ---- Activation layouts (NCHW tensors stored channels-last, as PyTorch's channels_last) ----

// True when 4-d t is stored channels-last (NHWC memory: strides (H*W*C, 1, W*C, C) on its
// non-size-1 dims) and is not plainly contiguous, except that a contiguous C=1 tensor
// counts as channels-last too (both layouts are the same memory; an image input).
bool is_channels_last(const Tensor& t);
// A new uninitialized (N, C, H, W) tensor, NHWC in memory when channels_last.
Tensor make_activation(const Shape& sizes, DType dt, bool channels_last);
// oneDNN's plain desc of an (N, C, H, W) activation: nhwc or nchw tag.
dnnl::memory::desc activation_desc(const Shape& sizes, DType dt, bool channels_last, const char* op);
// The desc of t as it lies in memory, canonicalized to the nhwc / nchw tag when t is
// channels-last / contiguous (so that equal layouts compare equal and need no reorder).
dnnl::memory::desc layout_desc(const Tensor& t, const char* op);
// t in the requested activation layout (t itself when it already is).
Tensor to_activation_layout(const Tensor& t, bool channels_last);

// True for oneDNN implementations that are plain reference loops (too slow to prefer over
// converting float16 to float32 and running an optimized float32 kernel).
bool is_reference_impl(const std::string& impl);

}  // namespace tc::cpu
