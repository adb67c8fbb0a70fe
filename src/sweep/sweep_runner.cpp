// run_sweep: measures the points of a spec's tunable space that its sweep file does not hold yet, in
// parallel, appending each as it finishes.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "kernelevolve/error.hpp"
#include "kernelevolve/mutator.hpp"
#include "kernelevolve/store.hpp"
#include "kernelevolve/sweep.hpp"

namespace kernelevolve {

namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Cuts a last line that a kill left without its newline, so that appending starts a fresh line.
void drop_partial_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  if (text.empty() || text.back() == '\n') return;
  const std::size_t last = text.rfind('\n');
  std::filesystem::resize_file(path, last == std::string::npos ? 0 : last + 1);
}

}  // namespace

SweepResult run_sweep(const Spec& spec, FitnessEvaluator& evaluator, const SweepOptions& options) {
  if (options.out.empty()) throw Error(ErrorCode::BadUsage, "a sweep needs a file to write (--out FILE)");
  if (options.jobs < 1) throw Error(ErrorCode::BadUsage, "a sweep's jobs must be at least 1");
  if (spec.seed.source.empty())
    throw Error(ErrorCode::BadUsage, spec.name + " has no seed kernel to sweep the tunables of");
  const std::vector<Bindings> space = tunable_space(spec);
  std::vector<std::string> columns;
  for (const auto& [name, value] : space.front()) columns.push_back(name);
  if (columns.empty())
    throw Error(ErrorCode::BadUsage, spec.name + ": the seed reads none of the spec's tunables: nothing to sweep");
  const std::string device = FitnessEvaluator::device_class(evaluator.device_info());
  const std::string hash = spec_hash(spec);

  SweepResult result;
  result.space = space.size();
  std::set<std::vector<std::int64_t>> done;
  auto values_of = [&](const Bindings& point) {
    std::vector<std::int64_t> v;
    for (const auto& name : columns) v.push_back(point.at(name));
    return v;
  };
  const bool resuming = std::filesystem::exists(options.out) && std::filesystem::file_size(options.out) > 0;
  if (resuming) {
    const Sweep old = read_sweep(options.out);
    if (old.spec_hash != hash) {
      throw Error(ErrorCode::BadUsage, options.out + " is a sweep of another spec (" + old.spec_name + ", " +
                                           old.spec_file + "), or of this one before an edit (spec_hash " +
                                           old.spec_hash + ", not " + hash + "): choose another --out");
    }
    if (old.device != device) {
      throw Error(ErrorCode::BadUsage, options.out + " was measured on " + old.device + ", not on " + device +
                                           ": times of two devices do not mix; choose another --out");
    }
    if (old.tunables != columns)
      throw Error(ErrorCode::BadUsage, options.out + ": its columns are not this spec's live tunables");
    for (const SweepPoint& p : old.points) done.insert(values_of(p.tunables));
  }
  // The order points are measured in: the seed, then the rest shuffled with a fixed seed, so that a drift
  // of the device over the sweep (clocks, temperature) does not line up with neighbours in the grid. The
  // same order on every resumption.
  std::vector<std::size_t> order(space.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffle_rng(20250601);
  std::shuffle(order.begin() + 1, order.end(), shuffle_rng);
  std::vector<std::size_t> todo;
  for (std::size_t i : order) {
    if (done.count(values_of(space[i]))) ++result.in_file;
    else todo.push_back(i);
  }

  if (!resuming) {
    std::ofstream header(options.out, std::ios::binary | std::ios::trunc);
    header << sweep_header(spec, columns, options.spec_file, device, options.commit, utc_now());
    if (!header) throw Error(ErrorCode::BadUsage, "cannot write the sweep file " + options.out);
  } else {
    drop_partial_line(options.out);
  }
  std::FILE* out = std::fopen(options.out.c_str(), "ab");
  if (!out) throw Error(ErrorCode::BadUsage, "cannot append to the sweep file " + options.out);
  if (resuming && !todo.empty()) {
    std::fprintf(out, "# resumed: %s %s\n", utc_now().c_str(), options.commit.c_str());
    std::fflush(out);
  }

  const auto start = std::chrono::steady_clock::now();
  const Language language = spec.seed.language.value_or(spec.language);
  std::mutex mutex;  // guards everything below and the file
  std::size_t next = 0, started = 0;
  bool stop = false;
  std::exception_ptr error;
  SweepProgress progress;
  progress.space = result.space;
  progress.in_file = result.in_file;

  auto take = [&](std::size_t& index) {
    std::lock_guard<std::mutex> lock(mutex);
    if (stop || next >= todo.size()) return false;
    if (options.max_points > 0 && started >= static_cast<std::size_t>(options.max_points)) {
      result.stop_reason = "max points";
      return false;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.time_limit_s > 0 && elapsed >= options.time_limit_s) {
      result.stop_reason = "time limit";
      return false;
    }
    index = todo[next++];
    ++started;
    return true;
  };
  auto measure = [&](std::size_t index) {
    SweepPoint point;
    point.tunables = space[index];
    try {
      const Evaluation e = evaluator.evaluate(Candidate{spec.seed.source, language, point.tunables}, 1000 + index);
      point.status = e.status;
      if (e.status == Status::ok) point.median_us = e.median_us();
      point.note = e.message;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
      stop = true;
      return;
    }
    std::lock_guard<std::mutex> lock(mutex);
    const std::string line = sweep_line(columns, point);
    std::fputs(line.c_str(), out);
    std::fflush(out);
    ++result.measured;
    result.failed += point.status != Status::ok;
    progress.measured = result.measured;
    progress.failed = result.failed;
    progress.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.on_progress) options.on_progress(progress);
  };
  auto work = [&]() {
    std::size_t index = 0;
    while (take(index)) measure(index);
  };
  std::size_t index = 0;
  if (!todo.empty() && todo.front() == 0 && take(index)) measure(index);  // the seed, alone
  std::vector<std::thread> threads;
  for (int j = 0; j < options.jobs; ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  std::fclose(out);
  if (error) std::rethrow_exception(error);
  result.complete = result.in_file + result.measured == result.space;
  if (result.complete) result.stop_reason = "complete";
  return result;
}

}  // namespace kernelevolve
