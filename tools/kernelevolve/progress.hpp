// What `kernelevolve run` shows of a run as it goes, on standard error.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.hpp"

namespace cli {

// A progress bar rewritten in place on a terminal (evaluations, best speedup, rate, ETA); on anything
// else, a plain line per improvement, so that logs stay readable.
class Progress final : public ke::Observer {
 public:
  Progress(std::int64_t max_evals, double max_time, bool quiet)
      : max_evals_(max_evals), max_time_(max_time), quiet_(quiet), tty_(isatty(2) != 0) {}

  void on_start(const ke::Spec& spec, const ke::DeviceInfo& device) override {
    start_ = std::chrono::steady_clock::now();
    if (!quiet_)
      std::fprintf(stderr, "evolving %s on %s (%s)\n", spec.name.c_str(), device.id.c_str(), device.name.c_str());
  }

  void on_node(const ke::Node& node, const ke::SearchState& state) override {
    if (first_evaluation_ < 0) first_evaluation_ = state.evaluations - 1;  // a resumed run starts past 0
    if (node.evaluation.status != ke::Status::ok) failed_ += 1;
    const bool improved = node.speedup > best_;
    if (improved) best_ = node.speedup;
    if (quiet_) return;
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = run_s > 0 ? double(state.evaluations - first_evaluation_) / run_s : 0;
    if (tty_) {
      // The time left by each limit in force; the bar shows the nearest one.
      double eta = -1, frac = 0;
      if (max_evals_ > 0 && rate > 0) {
        eta = double(max_evals_ - state.evaluations) / rate;
        frac = double(state.evaluations) / double(max_evals_);
      }
      if (max_time_ > 0) {
        const double left = std::max(0.0, max_time_ - state.elapsed_s);
        if (eta < 0 || left < eta) {
          eta = left;
          frac = state.elapsed_s / max_time_;
        }
      }
      frac = std::clamp(frac, 0.0, 1.0);
      const int width = 24;
      const int filled = static_cast<int>(frac * width);
      char eta_text[32] = "?";
      if (eta >= 0) std::snprintf(eta_text, sizeof eta_text, "%.0fs", std::max(0.0, eta));
      std::fprintf(stderr, "\r[%.*s%*s] %lld", filled, "########################", width - filled, "",
                   (long long)state.evaluations);
      if (max_evals_ > 0) std::fprintf(stderr, "/%lld", (long long)max_evals_);
      std::fprintf(stderr, " evals  best %.2fx  failed %lld  %.2f/s  eta %s \x1b[K", best_, (long long)failed_, rate,
                   eta_text);
    } else if (improved || node.id == 0) {
      std::fprintf(stderr, "node %lld: %s %.2fx (%s) after %lld evaluations, %.1f s\n", (long long)node.id,
                   ke::to_string(node.evaluation.status), node.speedup, node.note.c_str(), (long long)state.evaluations,
                   state.elapsed_s);
    }
  }

  // Only the first kernel's failed attempts (no parents): the search's own failures would drown the bar.
  void on_mutator_failure(const ke::Mutation& m, const std::vector<ke::NodeId>& parents) override {
    if (quiet_ || !parents.empty()) return;
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\x1b[K" : "", m.error.c_str());
  }

  void on_confirmation(const ke::Confirmation& c) override {
    if (quiet_) return;
    if (tty_) std::fprintf(stderr, "\n");
    tty_ = false;  // the bar is done: what follows is lines
    std::fprintf(stderr, "%s node %lld against the seed (%d rounds): %.2fx; the search measured %.2fx\n",
                 c.confirmed ? "confirmed" : "NOT confirmed:", (long long)c.node, c.rounds, c.speedup,
                 c.search_speedup);
  }

  void on_finish(const ke::RunResult&, const ke::SearchGraph&) override {
    if (tty_ && !quiet_) std::fprintf(stderr, "\n");
  }

  // torch.compile's first call may take a minute: say what the run is doing meanwhile.
  void on_baseline(const ke::Baseline& b) override {
    if (quiet_) return;
    const char* label = b.name == "compile" ? "torch.compile" : "PyTorch eager";
    if (b.evaluation.status == ke::Status::pending) {
      std::fprintf(stderr, "%smeasuring the baseline %s ...%s", tty_ ? "\r" : "", label, tty_ ? "\x1b[K" : "\n");
    } else if (b.evaluation.status == ke::Status::ok) {
      std::string times;
      for (const auto& t : b.evaluation.timings) {
        char time[32];
        std::snprintf(time, sizeof time, " %.1f us", t.median_us);
        times += time;
      }
      std::fprintf(stderr, "%sbaseline %s:%s%s", tty_ ? "\r" : "", label, times.c_str(), tty_ ? "\x1b[K\n" : "\n");
    } else {
      std::fprintf(stderr, "%sbaseline %s: no time (%s: %s)%s", tty_ ? "\r" : "", label,
                   ke::to_string(b.evaluation.status), b.evaluation.message.c_str(), tty_ ? "\x1b[K\n" : "\n");
    }
  }

 private:
  std::int64_t max_evals_;
  double max_time_;
  bool quiet_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::int64_t first_evaluation_ = -1;
  double best_ = 0;
  std::int64_t failed_ = 0;
};

}  // namespace cli
