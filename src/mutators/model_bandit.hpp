// ModelBandit: which of several models to ask next, by each one's recent improvement per unit of cost
// (dollars, or tokens where not every model has a price). Discounted UCB1: every pull ages what came
// before, so a model that stops paying off loses its lead, and one left aside is tried again in time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kernelevolve::mutators {

class ModelBandit {
 public:
  // `exploration` weighs the confidence bonus; `discount` in (0, 1] is how much of the past each pull keeps.
  explicit ModelBandit(std::size_t arms, double exploration = 1.0, double discount = 0.95);
  // The arm to pull: any never pulled first (in order); else the highest value (scaled by the best arm's, so
  // that the bonus weighs the same whatever the unit of cost) plus the bonus. Ties go by `rng`.
  std::size_t choose(std::mt19937_64& rng) const;
  // A call made to `arm` at `cost` (dollars or tokens; 0 for one that cost nothing).
  void pulled(std::size_t arm, double cost);
  // What a call of `arm` brought, once its child is measured: the relative gain over its parent, >= 0.
  void credit(std::size_t arm, double gain);
  // Recent gain per unit of cost; 0 before any cost.
  double value(std::size_t arm) const;
  // Pulls so far, undiscounted.
  std::int64_t pulls(std::size_t arm) const;
  std::size_t arms() const { return arms_.size(); }

 private:
  struct Arm {
    double weight = 0;  // discounted pulls
    double cost = 0;    // discounted cost
    double gain = 0;    // discounted gain
    std::int64_t pulls = 0;
  };
  std::vector<Arm> arms_;
  double exploration_, discount_;
};

}  // namespace kernelevolve::mutators
