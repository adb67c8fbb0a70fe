// The evaluation pipeline: with several candidates in flight, the next ones compile (and verify) while
// the current one is timed, and two timing runs on one device never overlap, so the numbers stay true.
// Real CPU kernels, evaluated by two LocalEvaluators sharing a timing lock file, each on a device that
// records when it compiles and when it runs a timed launch.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <kernelevolve/evolver.hpp>
#include <mutex>
#include <optional>

namespace ke = kernelevolve;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct Event {
  int evaluator;
  enum Kind { compile, warmup, timed } kind;
  Clock::time_point start, end;
};

struct Log {
  std::mutex mutex;
  std::vector<Event> events;
  void add(Event e) {
    std::lock_guard lock(mutex);
    events.push_back(e);
  }
};

// A CPU device that notes the interval of every compile and every launch.
class RecordingDevice final : public ke::Device {
 public:
  RecordingDevice(int evaluator, Log& log) : inner_(ke::open_device("cpu")), evaluator_(evaluator), log_(log) {}
  const ke::DeviceInfo& info() override { return inner_->info(); }
  ke::CompileResult compile(const ke::KernelSource& source) override {
    const auto t0 = Clock::now();
    auto r = inner_->compile(source);
    if (!r.cached) log_.add({evaluator_, Event::compile, t0, Clock::now()});
    return r;
  }
  std::unique_ptr<ke::Buffer> allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  ke::LaunchResult launch(ke::Kernel& kernel, void** args, const ke::LaunchDims& dims, bool timed,
                          bool flush_cache) override {
    const auto t0 = Clock::now();
    auto r = inner_->launch(kernel, args, dims, timed, flush_cache);
    log_.add({evaluator_, timed ? Event::timed : Event::warmup, t0, Clock::now()});
    return r;
  }
  bool healthy() const override { return inner_->healthy(); }

 private:
  std::shared_ptr<ke::Device> inner_;
  int evaluator_;
  Log& log_;
};

// Hands each evaluation to an idle evaluator of a fixed pool: what WorkerEvaluator does with processes.
class Pool final : public ke::FitnessEvaluator {
 public:
  explicit Pool(std::vector<std::shared_ptr<ke::FitnessEvaluator>> members)
      : members_(std::move(members)), busy_(members_.size(), false) {}
  ke::Evaluation evaluate(const ke::Candidate& c, std::uint64_t seed) override {
    std::size_t slot = 0;
    {
      std::unique_lock lock(mutex_);
      free_.wait(lock, [&] { return std::find(busy_.begin(), busy_.end(), false) != busy_.end(); });
      slot = static_cast<std::size_t>(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
      busy_[slot] = true;
    }
    ke::Evaluation e = members_[slot]->evaluate(c, seed);
    {
      std::lock_guard lock(mutex_);
      busy_[slot] = false;
    }
    free_.notify_one();
    return e;
  }
  ke::DeviceInfo device_info() override { return members_[0]->device_info(); }

 private:
  std::vector<std::shared_ptr<ke::FitnessEvaluator>> members_;
  std::mutex mutex_;
  std::condition_variable free_;
  std::vector<bool> busy_;
};

bool overlap(Clock::time_point a0, Clock::time_point a1, Clock::time_point b0, Clock::time_point b1) {
  return a0 < b1 && b0 < a1;
}

struct Interval {
  int evaluator;
  Clock::time_point start, end;
};

// An evaluator's timing runs: each maximal sequence of its timed launches, with the untimed warm-up
// launches just before them (the lock covers those too).
std::vector<Interval> timing_runs(const std::vector<Event>& events, int evaluator) {
  std::vector<Interval> runs;
  std::optional<Interval> open;
  std::optional<Clock::time_point> warm_start;
  for (const Event& e : events) {
    if (e.evaluator != evaluator || e.kind == Event::compile) continue;
    if (e.kind == Event::timed) {
      if (!open) open = Interval{evaluator, e.start, e.end};
      open->end = e.end;
    } else if (open) {
      runs.push_back(*open);
      open.reset();
    }
  }
  if (open) runs.push_back(*open);
  return runs;
}

struct Findings {
  int timed_overlaps = 0;          // timed launches of one evaluator inside a timing run of the other
  int compiles_during_timing = 0;  // compiles of one evaluator while the other was timing
  int untimed_during_timing = 0;   // verification launches of one evaluator while the other was timing
  int timing_runs = 0;
};

Findings run_search(const std::string& lock_path, int evaluations) {
  const ke::Spec spec = ke::load_spec(std::string(KE_FIXTURES) + "/e2e/colsum.json");
  ke::EvalOptions options;
  options.trials = 2;
  options.target_ms = 15;
  options.timing_lock = lock_path;
  Log log;
  std::vector<std::shared_ptr<ke::FitnessEvaluator>> members;
  for (int i = 0; i < 2; ++i) {
    members.push_back(std::make_shared<ke::LocalEvaluator>(spec, std::make_shared<RecordingDevice>(i, log), options));
  }
  ke::EvolverOptions eo;
  eo.jobs = 2;
  ke::Evolver evolver(spec, std::make_shared<Pool>(members), std::make_shared<ke::ParamMutator>(),
                      ke::make_policy("greedy"), ke::max_evaluations(evaluations), eo);
  evolver.run();
  std::vector<Event> events = log.events;
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.start < b.start; });
  Findings f;
  for (int me = 0; me < 2; ++me) {
    const int other = 1 - me;
    for (const Interval& run : timing_runs(events, me)) {
      f.timing_runs += 1;
      for (const Event& e : events) {
        if (e.evaluator != other) continue;
        if (e.kind == Event::timed && overlap(run.start, run.end, e.start, e.end)) f.timed_overlaps += 1;
        if (e.kind == Event::compile && overlap(run.start, run.end, e.start, e.end)) f.compiles_during_timing += 1;
        if (e.kind == Event::warmup && overlap(run.start, run.end, e.start, e.end)) f.untimed_during_timing += 1;
      }
    }
  }
  return f;
}

}  // namespace

TEST_CASE("with two candidates in flight, one compiles while the other is timed, and timings never overlap") {
  const fs::path lock = fs::temp_directory_path() / ("ke_pipeline_" + std::to_string(getpid()) + ".lock");
  const Findings f = run_search(lock.string(), 10);
  fs::remove(lock);
  MESSAGE("timing runs " << f.timing_runs << ", compiles during another's timing " << f.compiles_during_timing
                         << ", verification launches during another's timing " << f.untimed_during_timing);
  CHECK(f.timing_runs >= 2 * 10);  // a run per workload per evaluation that verified
  CHECK(f.timed_overlaps == 0);
  CHECK(f.compiles_during_timing >= 1);
}

TEST_CASE("without the lock the same search does overlap its timings (the check above can fail)") {
  const Findings f = run_search("", 10);
  MESSAGE("unlocked: " << f.timed_overlaps << " timed launches inside another's timing run");
  // Two threads on two cores overlap almost surely; on one busy core they may happen not to.
  WARN(f.timed_overlaps > 0);
}
