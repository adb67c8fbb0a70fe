// ModelPolicy: a surrogate of a kernel's tunable space, fitted by XGBoost to the points measured so far,
// that chooses the parameter mutator's next point by predicted time and uncertainty.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "kernelevolve/error.hpp"
#include "kernelevolve/selection.hpp"

#if KE_WITH_XGBOOST
#include <xgboost/c_api.h>

#include <mutex>
#endif

namespace kernelevolve {

bool model_policy_available() { return KE_WITH_XGBOOST != 0; }

#if KE_WITH_XGBOOST

namespace {

void check(int rc, const char* what) {
  if (rc != 0)
    throw Error(ErrorCode::Internal, std::string("the model policy: XGBoost ") + what + ": " + XGBGetLastError());
}

struct Matrix {
  DMatrixHandle handle = nullptr;
  Matrix(const std::vector<float>& rows, std::size_t n, std::size_t columns) {
    check(XGDMatrixCreateFromMat(rows.data(), n, columns, std::numeric_limits<float>::quiet_NaN(), &handle), "matrix");
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  ~Matrix() { XGDMatrixFree(handle); }
};

struct Booster {
  BoosterHandle handle = nullptr;
  explicit Booster(const Matrix& train) { check(XGBoosterCreate(&train.handle, 1, &handle), "booster"); }
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;
  ~Booster() { XGBoosterFree(handle); }
  void set(const char* key, const std::string& value) { check(XGBoosterSetParam(handle, key, value.c_str()), key); }
};

bool power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

using Point = std::vector<std::int64_t>;  // a point's values, in the order of its space's axes

// The ensemble's predictions of ln(time) over some points: each member's, their mean and spread.
struct Predictions {
  std::size_t members = 0;
  std::vector<float> by_member;  // members x points, a member's row after another's
  std::vector<double> mean, spread;
};

// A fit in progress: its training rows frozen when it began, each member's bootstrap weights and seed
// drawn then, and the members trained so far. A proposal trains a bounded slice of it (fit_step), so
// that no one proposal pays for a whole refit, and the slices depend only on the points measured, not
// on time: the search stays deterministic for a seed.
struct PendingFit {
  std::unique_ptr<Matrix> train;
  std::size_t rows = 0, measured = 0;       // training rows (priors included), and how many were measured ones
  std::vector<std::vector<float>> weights;  // per member
  std::vector<std::string> seeds;           // per member
  double base = 0;
  std::vector<std::unique_ptr<Booster>> members;
  int round = 0;                      // of the last member, the rounds trained
  std::vector<float> grid_predicted;  // the trained members' predictions of the grid, a member after another
};

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.141592653589793); }

}  // namespace

struct ModelPolicy::Impl {
  PolicyOptions options;

  // The points of one kernel source (one space of tunables), what was measured there and the model.
  struct Space {
    std::vector<std::string> axes;
    std::vector<std::vector<std::int64_t>> values;  // per axis, the values it takes
    std::vector<bool> log2;                         // per axis: its features are log2 (all powers of two)
    std::set<Point> taken;                          // every point in the graph, pending ones included
    std::vector<Point> x;                           // measured points, in the order measured
    std::vector<double> y;                          // their -ln(speedup); NaN when not ok
    std::vector<Point> prior_x;                     // from another device (PolicyOptions::prior)
    std::vector<double> prior_y;
    std::size_t oks = 0;
    std::size_t fitted_at = 0;  // x.size() at the last fit (0: never)
    std::vector<std::unique_ptr<Booster>> ensemble;
    std::unique_ptr<PendingFit> pending;  // the next ensemble, being trained a slice at a time
    // The valid grid when it is small enough to enumerate, with each point's prediction since the last fit.
    bool enumerated = false;
    std::vector<Point> grid;
    std::unique_ptr<Matrix> grid_matrix;  // the grid's features, made at the first fit
    Predictions predicted;
  };

  std::map<std::size_t, Space> spaces;  // by the hash of (language, source)
  const SearchGraph* seen_graph = nullptr;
  std::size_t seen_nodes = 0, seen_evaluated = 0;
  std::vector<std::size_t> space_of_node;  // by node id: its source's hash
  ModelStats stats;

  static std::size_t source_key(const Candidate& c) {
    return std::hash<std::string>{}(c.source) ^ (static_cast<std::size_t>(c.language) * 0x9e3779b97f4a7c15ULL);
  }

  static bool point_of(const Space& s, const Bindings& tunables, Point& out) {
    out.resize(s.axes.size());
    for (std::size_t a = 0; a < s.axes.size(); ++a) {
      const auto it = tunables.find(s.axes[a]);
      if (it == tunables.end()) return false;
      out[a] = it->second;
    }
    return true;
  }

  void add_node(Space& s, const Node& n) {
    Point p;
    if (point_of(s, n.candidate.tunables, p)) s.taken.insert(p);
  }

  void add_measurement(Space& s, const Node& n) {
    Point p;
    if (!point_of(s, n.candidate.tunables, p)) return;
    const bool ok = n.evaluation.status == Status::ok && n.speedup > 0;
    s.x.push_back(std::move(p));
    s.y.push_back(ok ? -std::log(n.speedup) : std::numeric_limits<double>::quiet_NaN());
    s.oks += ok;
  }

  // Reads what the graph gained since the last call into the spaces already open.
  void catch_up(const SearchGraph& graph) {
    if (seen_graph != &graph || graph.size() < seen_nodes) {
      spaces.clear();
      seen_graph = &graph;
      seen_nodes = seen_evaluated = 0;
      space_of_node.clear();
    }
    for (; seen_nodes < graph.size(); ++seen_nodes) {
      const Node& n = graph.node(static_cast<NodeId>(seen_nodes));
      space_of_node.push_back(source_key(n.candidate));
      if (auto it = spaces.find(space_of_node.back()); it != spaces.end()) add_node(it->second, n);
    }
    const auto& order = graph.evaluation_order();
    for (; seen_evaluated < order.size(); ++seen_evaluated) {
      const NodeId id = order[seen_evaluated];
      if (auto it = spaces.find(space_of_node[static_cast<std::size_t>(id)]); it != spaces.end()) {
        add_measurement(it->second, graph.node(id));
      }
    }
  }

  Space& open_space(const PointQuery& q) {
    const std::size_t key = source_key(q.graph.node(q.parent).candidate);
    if (auto it = spaces.find(key); it != spaces.end()) return it->second;
    Space& s = spaces[key];
    for (const auto& [name, values] : q.axes) {
      s.axes.push_back(name);
      s.values.push_back(values);
      s.log2.push_back(std::all_of(values.begin(), values.end(), power_of_two));
    }
    // What the graph holds of this source already (the spaces were caught up before it existed).
    for (std::size_t i = 0; i < q.graph.size(); ++i) {
      if (space_of_node[i] == key) add_node(s, q.graph.node(static_cast<NodeId>(i)));
    }
    const auto& order = q.graph.evaluation_order();
    for (std::size_t i = 0; i < seen_evaluated; ++i) {
      if (space_of_node[static_cast<std::size_t>(order[i])] == key) add_measurement(s, q.graph.node(order[i]));
    }
    for (const PriorPoint& prior : options.prior) {
      Point p;
      if (!point_of(s, prior.tunables, p)) continue;
      s.prior_x.push_back(std::move(p));
      s.prior_y.push_back(prior.speedup > 0 ? -std::log(prior.speedup) : std::numeric_limits<double>::quiet_NaN());
    }
    double grid = 1;
    for (const auto& v : s.values) grid *= static_cast<double>(v.size());
    if (grid <= options.model_grid_limit) {
      s.enumerated = true;
      const auto total = static_cast<std::size_t>(grid);
      Bindings b;
      for (std::size_t index = 0; index < total; ++index) {
        Point p(s.axes.size());
        std::size_t rest = index;
        for (std::size_t a = 0; a < s.axes.size(); ++a) {
          p[a] = s.values[a][rest % s.values[a].size()];
          rest /= s.values[a].size();
          b[s.axes[a]] = p[a];
        }
        if (q.spec.satisfies_constraints(b)) s.grid.push_back(std::move(p));
      }
    }
    return s;
  }

  std::size_t pairs(const Space& s) const {
    if (!options.model_pair_features) return 0;
    const auto logs = static_cast<std::size_t>(std::count(s.log2.begin(), s.log2.end(), true));
    return logs * (logs - (logs > 0)) / 2;
  }
  std::size_t columns(const Space& s) const { return s.axes.size() + pairs(s) + (s.prior_x.empty() ? 0 : 1); }

  // A point's features: each tunable's value (its log2 where every value is a power of two); with
  // model_pair_features, the log2 of each product of two such tunables too (a tile's area, threads x
  // items), which a tree cannot add up by itself.
  void features(const Space& s, const Point& p, bool prior, std::vector<float>& out) const {
    const std::size_t first = out.size();
    for (std::size_t a = 0; a < p.size(); ++a) {
      out.push_back(s.log2[a] ? static_cast<float>(std::log2(static_cast<double>(std::max<std::int64_t>(1, p[a]))))
                              : static_cast<float>(p[a]));
    }
    if (options.model_pair_features) {
      for (std::size_t a = 0; a < p.size(); ++a) {
        for (std::size_t b = a + 1; b < p.size(); ++b) {
          if (s.log2[a] && s.log2[b]) out.push_back(out[first + a] + out[first + b]);
        }
      }
    }
    if (!s.prior_x.empty()) out.push_back(prior ? 1.0f : 0.0f);
  }

  // Begins a fit of the ensemble: each member on a bootstrap of the points (Poisson weights), so that
  // their spread is the model's uncertainty. A point that is not ok gets the worst time seen, and more:
  // a region that fails is one to leave. All the random draws are made here, so that how the training
  // is sliced changes nothing.
  void begin_fit(Space& s, std::mt19937_64& rng) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> rows, labels;
    auto add_rows = [&](const std::vector<Point>& xs, const std::vector<double>& ys, bool prior) {
      double worst = -std::numeric_limits<double>::infinity();
      for (double y : ys)
        if (!std::isnan(y)) worst = std::max(worst, y);
      if (!std::isfinite(worst)) worst = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        features(s, xs[i], prior, rows);
        labels.push_back(static_cast<float>(std::isnan(ys[i]) ? worst + options.model_failure_penalty : ys[i]));
      }
    };
    add_rows(s.x, s.y, false);
    add_rows(s.prior_x, s.prior_y, true);
    auto f = std::make_unique<PendingFit>();
    f->rows = labels.size();
    f->measured = s.x.size();
    f->train = std::make_unique<Matrix>(rows, f->rows, columns(s));
    check(XGDMatrixSetFloatInfo(f->train->handle, "label", labels.data(), f->rows), "labels");
    f->base = std::accumulate(labels.begin(), labels.end(), 0.0) / static_cast<double>(f->rows);
    std::poisson_distribution<int> bootstrap(1.0);
    for (int m = 0; m < options.model_ensemble; ++m) {
      std::vector<float> w(f->rows);
      for (std::size_t i = 0; i < f->rows; ++i) {
        w[i] = static_cast<float>(bootstrap(rng)) * (i < f->measured ? 1.0f : static_cast<float>(options.prior_weight));
      }
      f->weights.push_back(std::move(w));
      f->seeds.push_back(std::to_string(rng() & 0x7fffffff));
    }
    s.pending = std::move(f);
    stats.fit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Trains the pending fit by up to `budget` row-rounds (one boosting round over every training row is
  // rows of them; at least one round is trained per call); when it is complete, makes it the ensemble
  // and predicts the grid with it. Returns whether it completed.
  bool fit_step(Space& s, double budget) {
    const auto start = std::chrono::steady_clock::now();
    PendingFit& f = *s.pending;
    double spent = 0;
    const auto ensemble = static_cast<std::size_t>(options.model_ensemble);
    do {
      if (f.members.empty() || f.round == options.model_rounds) {
        const std::size_t m = f.members.size();
        // The matrix's weights are the member's own while it trains; the members train one after another.
        check(XGDMatrixSetFloatInfo(f.train->handle, "weight", f.weights[m].data(), f.rows), "weights");
        auto b = std::make_unique<Booster>(*f.train);
        b->set("nthread", "1");  // deterministic, and the evaluations have the cores
        b->set("seed", f.seeds[m]);
        b->set("tree_method", "exact");
        b->set("max_depth", std::to_string(options.model_depth));
        b->set("eta", std::to_string(options.model_eta));
        b->set("min_child_weight", "0.5");
        b->set("lambda", "1");
        b->set("base_score", std::to_string(f.base));
        f.members.push_back(std::move(b));
        f.round = 0;
      }
      check(XGBoosterUpdateOneIter(f.members.back()->handle, f.round, f.train->handle), "training");
      f.round += 1;
      spent += static_cast<double>(f.rows);
      if (f.round == options.model_rounds && s.enumerated) {
        // Predicting a point costs about half a training row-round (bench_model_policy: 4,096 points in
        // about 0.9 ms a member; a round over 2,000 rows takes about 0.6-0.9 ms).
        if (!s.grid_matrix) s.grid_matrix = matrix_of(s, s.grid);
        predict_member(*f.members.back(), *s.grid_matrix, s.grid.size(), f.grid_predicted);
        spent += static_cast<double>(s.grid.size()) / 2;
      }
    } while (spent + static_cast<double>(f.rows) <= budget &&
             !(f.members.size() == ensemble && f.round == options.model_rounds));
    const bool done = f.members.size() == ensemble && f.round == options.model_rounds;
    if (done) {
      s.ensemble = std::move(f.members);
      s.fitted_at = f.measured;
      if (s.enumerated) {
        s.predicted.by_member = std::move(f.grid_predicted);
        summarize(s.predicted, ensemble, s.grid.size());
      }
      s.pending.reset();
      stats.fits += 1;
    }
    stats.fit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return done;
  }

  std::unique_ptr<Matrix> matrix_of(const Space& s, const std::vector<Point>& points) const {
    std::vector<float> rows;
    rows.reserve(points.size() * columns(s));
    for (const Point& p : points) features(s, p, false, rows);
    return std::make_unique<Matrix>(rows, points.size(), columns(s));
  }

  // One member's predictions of `n` points, appended to `out`.
  static void predict_member(const Booster& b, const Matrix& m, std::size_t n, std::vector<float>& out) {
    bst_ulong length = 0;
    const float* predicted = nullptr;
    check(XGBoosterPredict(b.handle, m.handle, 0, 0, 0, &length, &predicted), "prediction");
    out.insert(out.end(), predicted, predicted + n);
  }

  // The mean and spread over the members of their predictions (by_member filled).
  static void summarize(Predictions& p, std::size_t members, std::size_t n) {
    p.members = members;
    p.mean.assign(n, 0);
    p.spread.assign(n, 0);
    const double k = static_cast<double>(members);
    for (std::size_t i = 0; i < n; ++i) {
      double sum = 0, squares = 0;
      for (std::size_t m = 0; m < members; ++m) {
        const double v = p.by_member[m * n + i];
        sum += v;
        squares += v * v;
      }
      p.mean[i] = sum / k;
      p.spread[i] = std::sqrt(std::max(0.0, squares / k - p.mean[i] * p.mean[i]));
    }
  }

  Predictions predict(const Space& s, const std::vector<Point>& points) const {
    Predictions out;
    if (points.empty()) {
      out.members = s.ensemble.size();
      return out;
    }
    const auto m = matrix_of(s, points);
    out.by_member.reserve(s.ensemble.size() * points.size());
    for (const auto& b : s.ensemble) predict_member(*b, *m, points.size(), out.by_member);
    summarize(out, s.ensemble.size(), points.size());
    return out;
  }

  // How much a point is worth measuring (higher is better), by the acquisition function: "lcb" the least
  // plausible time (mean - exploration x spread), "ei" the expected improvement on the best measured
  // time, "thompson" one member's prediction (the member drawn per proposal).
  double worth(const Predictions& p, std::size_t i, double best_y, std::size_t member) const {
    const std::string& a = options.model_acquisition;
    if (a == "thompson") return -p.by_member[member * p.mean.size() + i];
    if (a == "ei") {
      const double sigma = p.spread[i], gain = best_y - p.mean[i];
      if (sigma <= 1e-12) return std::max(0.0, gain);
      const double z = gain / sigma;
      return gain * normal_cdf(z) + sigma * normal_pdf(z);
    }
    return -(p.mean[i] - options.model_exploration * p.spread[i]);
  }

  bool valid(const Spec& spec, const Space& s, const Point& p) const {
    Bindings b;
    for (std::size_t a = 0; a < s.axes.size(); ++a) b[s.axes[a]] = p[a];
    return spec.satisfies_constraints(b);
  }

  // Where the grid is too large to score whole: the unmeasured neighbours of the best points (one or two
  // axes a step away) and random restarts.
  std::vector<Point> candidates(const PointQuery& q, const Space& s) const {
    std::set<Point> out;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (!std::isnan(s.y[i])) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.y[a] < s.y[b]; });
    order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(options.model_neighbourhoods)));
    auto index_of = [&](std::size_t axis, std::int64_t v) {
      const auto& vs = s.values[axis];
      return static_cast<std::size_t>(std::find(vs.begin(), vs.end(), v) - vs.begin());
    };
    auto consider = [&](const Point& p) {
      if (!s.taken.count(p) && !out.count(p) && valid(q.spec, s, p)) out.insert(p);
    };
    for (std::size_t i : order) {
      const Point& centre = s.x[i];
      for (std::size_t a = 0; a < s.axes.size(); ++a) {
        for (int da : {-1, 1}) {
          const std::size_t at = index_of(a, centre[a]);
          if (at >= s.values[a].size() || (da < 0 && at == 0) || at + da >= s.values[a].size()) continue;
          Point p = centre;
          p[a] = s.values[a][at + da];
          consider(p);
          for (std::size_t b = a + 1; b < s.axes.size(); ++b) {
            for (int db : {-1, 1}) {
              const std::size_t bt = index_of(b, centre[b]);
              if (bt >= s.values[b].size() || (db < 0 && bt == 0) || bt + db >= s.values[b].size()) continue;
              Point r = p;
              r[b] = s.values[b][bt + db];
              consider(r);
            }
          }
        }
      }
    }
    for (int k = 0; k < options.model_restarts; ++k) consider(random_point(q, s));
    return {out.begin(), out.end()};
  }

  static double index_in(const Space& s, std::size_t axis, std::int64_t value) {
    const auto& vs = s.values[axis];
    return static_cast<double>(std::find(vs.begin(), vs.end(), value) - vs.begin());
  }

  Point random_point(const PointQuery& q, const Space& s) const {
    Point p(s.axes.size());
    for (std::size_t a = 0; a < s.axes.size(); ++a) {
      p[a] = s.values[a][std::uniform_int_distribution<std::size_t>(0, s.values[a].size() - 1)(q.rng)];
    }
    return p;
  }

  std::optional<ProposedPoint> to_proposal(const Space& s, const Point& p, const std::string& note) const {
    ProposedPoint out;
    for (std::size_t a = 0; a < s.axes.size(); ++a) out.tunables[s.axes[a]] = p[a];
    out.note = note;
    return out;
  }

  std::optional<ProposedPoint> propose(const PointQuery& q) {
    catch_up(q.graph);
    Space& s = open_space(q);
    const std::size_t data = s.oks + (s.prior_x.empty() ? 0 : static_cast<std::size_t>(options.model_min_points));
    if (data < static_cast<std::size_t>(options.model_min_points)) {
      // Too little to learn from yet: spread the first points over the space. The seed sits at the first
      // value of every axis, so the farthest point from it is the most it can learn from one more.
      if (s.enumerated) {
        std::vector<const Point*> open;
        for (const Point& p : s.grid)
          if (!s.taken.count(p)) open.push_back(&p);
        if (open.empty()) return std::nullopt;
        if (options.model_warmup == "maximin" || (options.model_warmup == "corner" && s.taken.size() <= 1)) {
          // The open point farthest from every taken one (in steps along each axis, scaled to the axis):
          // the corners first, then between.
          std::vector<double> reach(open.size(), std::numeric_limits<double>::infinity());
          for (std::size_t i = 0; i < open.size(); ++i) {
            for (const Point& t : s.taken) {
              double d = 0;
              for (std::size_t a = 0; a < s.axes.size(); ++a) {
                const double span = std::max<double>(1, static_cast<double>(s.values[a].size()) - 1);
                const double step = (index_in(s, a, (*open[i])[a]) - index_in(s, a, t[a])) / span;
                d += step * step;
              }
              reach[i] = std::min(reach[i], d);
            }
          }
          const double far = *std::max_element(reach.begin(), reach.end());
          std::vector<const Point*> farthest;
          for (std::size_t i = 0; i < open.size(); ++i)
            if (reach[i] >= far - 1e-12) farthest.push_back(open[i]);
          open = std::move(farthest);
        }
        return to_proposal(s, *open[std::uniform_int_distribution<std::size_t>(0, open.size() - 1)(q.rng)],
                           "model: exploring");
      }
      for (int k = 0; k < 64; ++k) {
        Point p = random_point(q, s);
        if (!s.taken.count(p) && valid(q.spec, s, p)) return to_proposal(s, p, "model: exploring");
      }
      return std::nullopt;
    }
    // A refit is due after max(1, n / divisor) new points. The first fit is made whole (there is nothing
    // to propose with before it); later ones a slice per proposal, the last ensemble serving meanwhile.
    const std::size_t since = s.x.size() - s.fitted_at;
    if (!s.pending &&
        (s.ensemble.empty() ||
         since >= std::max<std::size_t>(1, s.fitted_at / static_cast<std::size_t>(options.model_refit_divisor)))) {
      begin_fit(s, q.rng);
    }
    if (s.pending) fit_step(s, s.ensemble.empty() ? std::numeric_limits<double>::infinity() : options.model_fit_slice);
    // Scored whole (the grid, predicted at the last fit), or the candidates near the best, predicted now.
    std::vector<Point> fresh;
    Predictions fresh_predicted;
    const std::vector<Point>* points = &s.grid;
    const Predictions* predicted = &s.predicted;
    if (!s.enumerated) {
      fresh = candidates(q, s);
      fresh_predicted = predict(s, fresh);
      points = &fresh;
      predicted = &fresh_predicted;
    }
    double best_y = std::numeric_limits<double>::infinity();
    for (double y : s.y)
      if (!std::isnan(y)) best_y = std::min(best_y, y);
    const std::size_t member = std::uniform_int_distribution<std::size_t>(0, s.ensemble.size() - 1)(q.rng);
    // The most worth measuring; ties (trees predict alike over whole regions) broken at random, not by
    // the order of the grid.
    std::size_t best = points->size(), ties = 0;
    double best_worth = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < points->size(); ++i) {
      if (s.taken.count((*points)[i])) continue;
      const double w = worth(*predicted, i, best_y, member);
      if (w > best_worth + 1e-12) {
        best_worth = w;
        best = i;
        ties = 1;
      } else if (w >= best_worth - 1e-12 && std::uniform_int_distribution<std::size_t>(0, ties++)(q.rng) == 0) {
        best = i;
      }
    }
    if (best == points->size()) return std::nullopt;
    char note[96];
    std::snprintf(note, sizeof note, "model: predicted %.2fx (spread %.2f)", std::exp(-predicted->mean[best]),
                  predicted->spread[best]);
    return to_proposal(s, (*points)[best], note);
  }
};

ModelPolicy::ModelPolicy(PolicyOptions options) : impl_(std::make_unique<Impl>()) {
  static std::once_flag quiet;
  std::call_once(quiet, [] { XGBSetGlobalConfig("{\"verbosity\": 0}"); });
  if (options.model_ensemble < 2 || options.model_rounds < 1 || options.model_depth < 1 ||
      options.model_min_points < 1 || options.model_refit_divisor < 1 || options.prior_weight < 0 ||
      !(options.model_fit_slice > 0)) {
    throw Error(ErrorCode::BadUsage,
                "the model policy: ensemble must be at least 2; rounds, depth, min points and refit "
                "divisor at least 1; prior weight not negative; fit slice positive");
  }
  const std::string& w = options.model_warmup;
  if (w != "corner" && w != "random" && w != "maximin") {
    throw Error(ErrorCode::BadUsage, "the model policy's warm-up is corner, random or maximin, not '" + w + "'");
  }
  const std::string& a = options.model_acquisition;
  if (a != "lcb" && a != "ei" && a != "thompson") {
    throw Error(ErrorCode::BadUsage, "the model policy's acquisition is lcb, ei or thompson, not '" + a + "'");
  }
  impl_->options = std::move(options);
}

ModelPolicy::~ModelPolicy() = default;

std::vector<NodeId> ModelPolicy::select(const SearchGraph& graph, std::mt19937_64&) {
  // The parent is only where the parameter mutator reads the live tunables from: the fastest node.
  if (const auto best = graph.best()) return {*best};
  return {0};
}

std::optional<ProposedPoint> ModelPolicy::propose_point(const PointQuery& query) {
  const auto start = std::chrono::steady_clock::now();
  auto out = impl_->propose(query);
  impl_->stats.proposals += 1;
  impl_->stats.propose_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

ModelStats ModelPolicy::stats() const { return impl_->stats; }

#else  // no XGBoost in this build

struct ModelPolicy::Impl {};

ModelPolicy::ModelPolicy(PolicyOptions) {
  throw Error(ErrorCode::BadUsage,
              "the model policy needs XGBoost, and this KernelEvolve was built without it (Debian: apt-get install "
              "libxgboost-dev, then configure again); choose another --policy");
}
ModelPolicy::~ModelPolicy() = default;
std::vector<NodeId> ModelPolicy::select(const SearchGraph&, std::mt19937_64&) { return {0}; }
std::optional<ProposedPoint> ModelPolicy::propose_point(const PointQuery&) { return std::nullopt; }
ModelStats ModelPolicy::stats() const { return {}; }

#endif

}  // namespace kernelevolve
