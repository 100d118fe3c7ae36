// The choices of `tensorcast train/bench/report` as enums: the flag parser turns each
// flag's text into one (args.h, ArgParser::choice), and past it the code compares
// enumerators, never strings. Each enum has one table of names, in its order: what its
// flag accepts, what a checkpoint's metadata stores and what logs print.
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tcli {

enum class ModelKind { kCnn, kMlp, kMlpLarge, kGpt };
// kAuto resolves to one of the others (resolve_precision, trainer.h).
enum class PrecisionChoice { kAuto, kFp32, kBf16, kFp16, kBf16Pure, kFp8 };
// --fp8-recipe: the recipe of --precision fp8 (tc::fp8::Recipe::named).
enum class Fp8RecipeChoice { kTensorwise, kDelayed, kRowwise, kMxfp8 };
enum class OptimizerKind { kAdamW, kSgd };
enum class LrSchedule { kCosine, kConstant };
// How bf16-pure rounds each weight update (tc::optim::WeightUpdate, Rounding).
enum class WeightUpdate { kKahan, kNearest, kStochastic };
// A non-finite loss or gradient that no GradScaler handles (TrainConfig::on_nonfinite).
enum class OnNonfinite { kStop, kSkip, kContinue };

template <class E>
struct SettingNames;  // `names`: each enumerator's name, in the enum's order
template <>
struct SettingNames<ModelKind> {
  static constexpr std::array<std::string_view, 4> names{"cnn", "mlp", "mlp-large", "gpt"};
};
template <>
struct SettingNames<PrecisionChoice> {
  static constexpr std::array<std::string_view, 6> names{"auto", "fp32", "bf16", "fp16", "bf16-pure", "fp8"};
};
template <>
struct SettingNames<Fp8RecipeChoice> {
  static constexpr std::array<std::string_view, 4> names{"tensorwise", "delayed", "rowwise", "mxfp8"};
};
template <>
struct SettingNames<OptimizerKind> {
  static constexpr std::array<std::string_view, 2> names{"adamw", "sgd"};
};
template <>
struct SettingNames<LrSchedule> {
  static constexpr std::array<std::string_view, 2> names{"cosine", "constant"};
};
template <>
struct SettingNames<WeightUpdate> {
  static constexpr std::array<std::string_view, 3> names{"kahan", "nearest", "stochastic"};
};
template <>
struct SettingNames<OnNonfinite> {
  static constexpr std::array<std::string_view, 3> names{"stop", "skip", "continue"};
};

// The name of a setting ("mlp-large").
template <class E>
std::string setting_name(E value) {
  return std::string(SettingNames<E>::names[static_cast<size_t>(value)]);
}

// The setting named `text`, if any.
template <class E>
std::optional<E> parse_setting(std::string_view text) {
  const auto& names = SettingNames<E>::names;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

// Every value with its name, for ArgParser::choice; `except` leaves some out.
template <class E>
std::vector<std::pair<std::string, E>> setting_choices(std::vector<E> except = {}) {
  std::vector<std::pair<std::string, E>> r;
  for (size_t i = 0; i < SettingNames<E>::names.size(); ++i) {
    const E e = static_cast<E>(i);
    bool excluded = false;
    for (E x : except) excluded = excluded || x == e;
    if (!excluded) r.emplace_back(setting_name(e), e);
  }
  return r;
}

// The names as prose: "cnn, mlp, mlp-large or gpt".
template <class E>
std::string setting_names_text() {
  const auto& names = SettingNames<E>::names;
  std::string r;
  for (size_t i = 0; i < names.size(); ++i)
    r += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return r;
}

}  // namespace tcli
