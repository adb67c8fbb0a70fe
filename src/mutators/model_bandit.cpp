#include "mutators/model_bandit.hpp"

#include <algorithm>
#include <cmath>

#include "kernelevolve/error.hpp"

namespace kernelevolve::mutators {

ModelBandit::ModelBandit(std::size_t arms, double exploration, double discount)
    : arms_(arms), exploration_(exploration), discount_(discount) {
  if (arms == 0) throw Error(ErrorCode::BadUsage, "ModelBandit: at least one model is needed");
  if (!(exploration >= 0) || !std::isfinite(exploration)) {
    throw Error(ErrorCode::BadUsage, "ModelBandit: exploration must be a number >= 0");
  }
  if (!(discount > 0 && discount <= 1)) throw Error(ErrorCode::BadUsage, "ModelBandit: discount must lie in (0, 1]");
}

double ModelBandit::value(std::size_t arm) const {
  const Arm& a = arms_.at(arm);
  return a.cost > 0 ? a.gain / a.cost : 0;
}

std::int64_t ModelBandit::pulls(std::size_t arm) const { return arms_.at(arm).pulls; }

std::size_t ModelBandit::choose(std::mt19937_64& rng) const {
  for (std::size_t i = 0; i < arms_.size(); ++i) {
    if (arms_[i].pulls == 0) return i;
  }
  double best_value = 0, total_weight = 0;
  for (std::size_t i = 0; i < arms_.size(); ++i) {
    best_value = std::max(best_value, value(i));
    total_weight += arms_[i].weight;
  }
  std::vector<std::size_t> top;
  double top_score = -1;
  for (std::size_t i = 0; i < arms_.size(); ++i) {
    const double mean = best_value > 0 ? value(i) / best_value : 0;
    const double weight = std::max(arms_[i].weight, 1e-9);
    const double bonus = exploration_ * std::sqrt(2 * std::log(std::max(total_weight, 1.0)) / weight);
    const double score = mean + bonus;
    // Scores a rounding apart are a tie: the order of the arms must not decide.
    if (score > top_score + 1e-12) {
      top_score = score;
      top = {i};
    } else if (std::abs(score - top_score) <= 1e-12) {
      top.push_back(i);
    }
  }
  if (top.size() == 1) return top.front();
  return top[std::uniform_int_distribution<std::size_t>(0, top.size() - 1)(rng)];
}

void ModelBandit::pulled(std::size_t arm, double cost) {
  Arm& chosen = arms_.at(arm);
  for (Arm& a : arms_) {
    a.weight *= discount_;
    a.cost *= discount_;
    a.gain *= discount_;
  }
  chosen.weight += 1;
  chosen.cost += std::max(cost, 0.0);
  chosen.pulls += 1;
}

void ModelBandit::credit(std::size_t arm, double gain) {
  if (gain > 0 && std::isfinite(gain)) arms_.at(arm).gain += gain;
}

}  // namespace kernelevolve::mutators
