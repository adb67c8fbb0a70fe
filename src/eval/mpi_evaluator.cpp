// Evaluation across hosts through MPI: rank 0 dispatches candidates, the other ranks evaluate them in
// their own worker processes and answer. Only one thread per process calls MPI at a time (rank 0: its
// progress thread; other ranks: the serve loop and the heartbeat, under a mutex).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <simdjson.h>
#include <sstream>
#include <thread>

#include "eval/wire.hpp"
#include "kernelevolve/distributed.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/json.hpp"

#ifdef KE_WITH_MPI
#include <mpi.h>
#endif

namespace kernelevolve {

#ifndef KE_WITH_MPI

namespace {
[[noreturn]] void no_mpi() {
  throw Error(ErrorCode::BadUsage,
              "this build of KernelEvolve has no MPI support: rebuild with -DKE_WITH_MPI=ON (Debian: libopenmpi-dev)");
}
}  // namespace

bool mpi_built() { return false; }
int mpi_init(int*, char***) { no_mpi(); }
int mpi_rank() { return 0; }
int mpi_size() { return 1; }
void mpi_finalize() {}
long mpi_serve(const std::string&, WorkerOptions) { no_mpi(); }
struct MpiEvaluator::Impl {};
MpiEvaluator::MpiEvaluator(Spec, WorkerOptions, MpiOptions) { no_mpi(); }
MpiEvaluator::~MpiEvaluator() = default;
Evaluation MpiEvaluator::evaluate(const Candidate&, std::uint64_t) { no_mpi(); }
Evaluation MpiEvaluator::evaluate_on(std::size_t, const Candidate&, std::uint64_t) { no_mpi(); }
DeviceInfo MpiEvaluator::device_info() { no_mpi(); }
std::vector<std::string> MpiEvaluator::device_classes() { no_mpi(); }
int MpiEvaluator::live_ranks() const { return 0; }
std::vector<std::string> MpiEvaluator::lost_ranks() const { return {}; }

#else

namespace {

enum Tag : int { kInit = 1, kHello = 2, kEval = 3, kResult = 4, kBeat = 5, kStop = 6 };

using Clock = std::chrono::steady_clock;

// Receives a waiting message of any size from `source` with `tag` (after a probe found it).
std::string receive(int source, int tag) {
  MPI_Status status;
  MPI_Probe(source, tag, MPI_COMM_WORLD, &status);
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  std::string text(static_cast<std::size_t>(count), '\0');
  MPI_Recv(text.data(), count, MPI_CHAR, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return text;
}

std::string worker_options_json(const WorkerOptions& o) {
  std::ostringstream out;
  out << "{\"jobs\": " << o.jobs << ", \"timeout_s\": " << o.timeout_s << ", \"min_timeout_s\": " << o.min_timeout_s
      << ", \"timeout_factor\": " << o.timeout_factor << ", \"first_timeout_s\": " << o.first_timeout_s
      << ", \"eval\": " << wire::to_json(o.eval) << "}";
  return out.str();
}

WorkerOptions worker_options_from(simdjson::dom::element e, WorkerOptions base) {
  base.jobs = static_cast<int>(e["jobs"].get_int64().value());
  base.timeout_s = e["timeout_s"].get_double().value();
  base.min_timeout_s = e["min_timeout_s"].get_double().value();
  base.timeout_factor = e["timeout_factor"].get_double().value();
  base.first_timeout_s = e["first_timeout_s"].get_double().value();
  base.eval = wire::eval_options_from_json(simdjson::to_string(e["eval"].value()));
  return base;
}

std::string resolve_local(const std::string& device_id) {
  const auto colon = device_id.find(':');
  if (colon == std::string::npos || device_id.substr(colon + 1) != "local") return device_id;
  const std::string kind = device_id.substr(0, colon);
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  }
  int count = 0;
  for (const DeviceInfo& d : list_devices()) count += d.kind == kind;
  if (count == 0)
    throw Error(ErrorCode::DeviceUnavailable, "rank " + std::to_string(mpi_rank()) + ": no " + kind + " device");
  return kind + ":" + std::to_string(local % count);
}

}  // namespace

bool mpi_built() { return true; }

int mpi_init(int* argc, char*** argv) {
  // Open MPI's MPI_Finalize ends with a fence over every rank; once a rank has died, the survivors can wait
  // in it forever (seen with Open MPI 4.1 under --enable-recovery: the run done, both live ranks asleep
  // in ompi_mpi_finalize). Our protocol needs no final barrier: rank 0 has every result and has told each
  // live rank to stop. A user's own setting wins.
  ::setenv("OMPI_MCA_async_mpi_finalize", "1", /*overwrite=*/0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    throw Error(ErrorCode::Internal, "this MPI library does not support MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // a dead peer is an error code, not an abort
  return mpi_rank();
}

int mpi_rank() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int mpi_size() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

long mpi_serve(const std::string& device_id, WorkerOptions options) {
  std::mutex mpi;  // the serve loop and the heartbeat take turns
  auto send = [&](int tag, const std::string& text) {
    std::lock_guard lock(mpi);
    MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, tag, MPI_COMM_WORLD);
  };
  // Waits for the next message from rank 0 without holding the lock, so heartbeats keep flowing.
  auto next = [&](int& tag) {
    for (;;) {
      {
        std::lock_guard lock(mpi);
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
        if (flag) {
          tag = status.MPI_TAG;
          return receive(0, tag);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };

  int tag = 0;
  std::string init = next(tag);
  if (tag == kStop) return 0;
  std::unique_ptr<WorkerEvaluator> evaluator;
  simdjson::dom::parser parser;
  try {
    const simdjson::dom::element msg = parser.parse(init).value();
    const Spec spec =
        parse_spec(simdjson::to_string(msg["spec"].value()), std::string(msg["path"].get_string().value()));
    options = worker_options_from(msg["options"].value(), options);
    evaluator = std::make_unique<WorkerEvaluator>(spec, resolve_local(device_id), options);
    send(kHello, "{\"device\": " + wire::to_json(evaluator->device_info()) + "}");
  } catch (const Error& e) {
    send(kHello,
         "{\"error\": " + json_quote(e.what()) + ", \"code\": " + std::to_string(static_cast<int>(e.code())) + "}");
    while (next(tag), tag != kStop) {
    }
    return 0;
  }

  std::atomic<bool> busy{false}, done{false};
  std::thread heartbeat([&] {
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      if (busy && !done) send(kBeat, "{}");
    }
  });
  long served = 0;
  for (;;) {
    const std::string text = next(tag);
    if (tag == kStop) break;
    if (tag != kEval) continue;
    std::string reply;
    try {
      const simdjson::dom::element msg = parser.parse(text).value();
      const std::int64_t id = msg["id"].get_int64().value();
      const Candidate candidate = wire::candidate_from_json(simdjson::to_string(msg["candidate"].value()));
      const auto seed = msg["seed"].get_uint64().value();
      busy = true;
      const Evaluation e = evaluator->evaluate(candidate, seed);
      busy = false;
      reply = "{\"id\": " + std::to_string(id) + ", \"evaluation\": " + wire::to_json(e) + "}";
      served += 1;
    } catch (const std::exception& ex) {
      busy = false;
      reply = "{\"id\": -1, \"error\": " + json_quote(ex.what()) + "}";
    }
    send(kResult, reply);
  }
  done = true;
  heartbeat.join();
  return served;
}

struct MpiEvaluator::Impl {
  struct Job {
    Candidate candidate;
    std::uint64_t seed = 0;
    long device_class = -1;  // -1: any
    int requeues = 0;
    std::promise<Evaluation> result;
  };
  struct Rank {
    int rank = 0;
    bool alive = false;
    std::size_t device_class = 0;
    std::shared_ptr<Job> job;  // in flight
    std::int64_t job_id = -1;
    Clock::time_point last_heard;
  };

  Spec spec;
  MpiOptions mpi;
  std::vector<Rank> ranks;
  std::vector<std::string> classes;
  DeviceInfo info;
  mutable std::mutex mutex;
  std::deque<std::shared_ptr<Job>> queue;
  std::vector<std::string> lost;
  std::atomic<bool> stopping{false};
  std::thread progress;
  std::int64_t next_id = 0;
  std::list<std::pair<MPI_Request, std::string>> sends;  // buffers live until their send completes

  void post(int rank, int tag, std::string text) {
    sends.emplace_back(MPI_REQUEST_NULL, std::move(text));
    auto& [request, buffer] = sends.back();
    MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, rank, tag, MPI_COMM_WORLD, &request);
  }
  void reap_sends() {
    for (auto it = sends.begin(); it != sends.end();) {
      int flag = 0;
      MPI_Test(&it->first, &flag, MPI_STATUS_IGNORE);
      it = flag ? sends.erase(it) : std::next(it);
    }
  }

  Rank* rank_of(int r) {
    for (auto& x : ranks) {
      if (x.rank == r) return &x;
    }
    return nullptr;
  }

  void give_up(Rank& r, const std::string& why) {
    r.alive = false;
    lost.push_back("rank " + std::to_string(r.rank) + ": " + why);
    if (r.job) {
      std::shared_ptr<Job> job = std::move(r.job);
      r.job_id = -1;
      if (job->requeues < mpi.max_requeues) {
        job->requeues += 1;
        queue.push_front(job);
      } else {
        Evaluation e;
        e.status = Status::crashed;
        e.message = "the rank evaluating it died (" + why + ")";
        e.device = classes.at(r.device_class);
        job->result.set_value(e);
      }
    }
  }

  void loop() {
    for (;;) {
      {
        std::lock_guard lock(mutex);
        // Hand queued work to idle live ranks of a fitting class.
        for (auto it = queue.begin(); it != queue.end();) {
          Rank* idle = nullptr;
          for (auto& r : ranks) {
            if (r.alive && !r.job &&
                ((*it)->device_class < 0 || r.device_class == static_cast<std::size_t>((*it)->device_class))) {
              idle = &r;
              break;
            }
          }
          if (!idle) {
            ++it;
            continue;
          }
          idle->job = *it;
          idle->job_id = next_id++;
          idle->last_heard = Clock::now();
          post(idle->rank, kEval,
               "{\"id\": " + std::to_string(idle->job_id) + ", \"seed\": " + std::to_string((*it)->seed) +
                   ", \"candidate\": " + wire::to_json((*it)->candidate) + "}");
          it = queue.erase(it);
        }
        // Ranks silent too long while busy are dead.
        const auto now = Clock::now();
        for (auto& r : ranks) {
          if (r.alive && r.job && now - r.last_heard > std::chrono::duration<double>(mpi.rank_silence_s)) {
            give_up(r, "silent for " + std::to_string(static_cast<int>(mpi.rank_silence_s)) + " s while evaluating");
          }
        }
        // Work for a class of device no live rank has can never run.
        for (auto it = queue.begin(); it != queue.end();) {
          const long cls = (*it)->device_class;
          const bool servable = std::any_of(ranks.begin(), ranks.end(), [&](const Rank& r) {
            return r.alive && (cls < 0 || r.device_class == static_cast<std::size_t>(cls));
          });
          if (servable) {
            ++it;
            continue;
          }
          (*it)->result.set_exception(std::make_exception_ptr(
              Error(ErrorCode::DeviceUnavailable, "no live rank has the device this needs: " + join_lost())));
          it = queue.erase(it);
        }
        const bool any_alive = std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.alive; });
        if (!any_alive) {
          while (!queue.empty()) {
            queue.front()->result.set_exception(std::make_exception_ptr(
                Error(ErrorCode::DeviceUnavailable, "every evaluation rank is gone: " + join_lost())));
            queue.pop_front();
          }
        }
        if (stopping && queue.empty() &&
            std::none_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.alive && r.job; })) {
          return;
        }
      }
      reap_sends();
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      const std::string text = receive(status.MPI_SOURCE, status.MPI_TAG);
      std::lock_guard lock(mutex);
      Rank* r = rank_of(status.MPI_SOURCE);
      if (!r || !r->alive) continue;
      r->last_heard = Clock::now();
      if (status.MPI_TAG != kResult || !r->job) continue;
      std::shared_ptr<Job> job = std::move(r->job);
      r->job_id = -1;
      simdjson::dom::parser parser;
      simdjson::dom::element msg;
      if (parser.parse(text).get(msg) != simdjson::SUCCESS) {
        job->result.set_exception(std::make_exception_ptr(Error(ErrorCode::Internal, "rank sent a corrupted result")));
        continue;
      }
      simdjson::dom::element evaluation;
      if (msg["evaluation"].get(evaluation) == simdjson::SUCCESS) {
        job->result.set_value(wire::evaluation_from_json(simdjson::to_string(evaluation)));
      } else {
        job->result.set_exception(
            std::make_exception_ptr(Error(ErrorCode::Internal, "rank " + std::to_string(r->rank) + ": " +
                                                                   std::string(msg["error"].get_string().value()))));
      }
    }
  }

  std::string join_lost() const {
    std::string out;
    for (const auto& l : lost) out += (out.empty() ? "" : "; ") + l;
    return out.empty() ? "none started" : out;
  }

  Evaluation submit(const Candidate& c, std::uint64_t seed, long device_class) {
    auto job = std::make_shared<Job>();
    job->candidate = c;
    job->seed = seed;
    job->device_class = device_class;
    std::future<Evaluation> result = job->result.get_future();
    {
      std::lock_guard lock(mutex);
      if (std::none_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.alive; })) {
        throw Error(ErrorCode::DeviceUnavailable, "every evaluation rank is gone: " + join_lost());
      }
      queue.push_back(job);
    }
    return result.get();
  }
};

MpiEvaluator::MpiEvaluator(Spec spec, WorkerOptions options, MpiOptions mpi) : impl_(std::make_unique<Impl>()) {
  spec.validate();
  if (mpi_rank() != 0) throw Error(ErrorCode::BadUsage, "MpiEvaluator belongs on rank 0; other ranks call mpi_serve");
  const int size = mpi_size();
  if (size < 2)
    throw Error(ErrorCode::BadUsage, "MPI evaluation needs at least 2 ranks (rank 0 searches, the others evaluate)");
  impl_->mpi = mpi;
  const std::string init = "{\"path\": " + json_quote(spec.path.empty() ? spec.name : spec.path) +
                           ", \"options\": " + worker_options_json(options) + ", \"spec\": " + to_json(spec) + "}";
  for (int r = 1; r < size; ++r) {
    impl_->post(r, kInit, init);
    Impl::Rank rank;
    rank.rank = r;
    impl_->ranks.push_back(rank);
  }
  // Every rank answers with its device, or why it has none; a rank that never answers is lost.
  const auto deadline = Clock::now() + std::chrono::duration<double>(options.first_timeout_s);
  int waiting = size - 1;
  std::string refusals;
  while (waiting > 0 && Clock::now() < deadline) {
    impl_->reap_sends();
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kHello, MPI_COMM_WORLD, &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    const std::string text = receive(status.MPI_SOURCE, kHello);
    waiting -= 1;
    Impl::Rank* r = impl_->rank_of(status.MPI_SOURCE);
    simdjson::dom::parser parser;
    simdjson::dom::element msg = parser.parse(text).value();
    simdjson::dom::element device;
    if (msg["device"].get(device) != simdjson::SUCCESS) {
      const std::string why(msg["error"].get_string().value());
      impl_->lost.push_back("rank " + std::to_string(r->rank) + ": " + why);
      refusals += "\n  rank " + std::to_string(r->rank) + ": " + why;
      continue;
    }
    const DeviceInfo info = wire::device_info_from_json(simdjson::to_string(device));
    const std::string cls = device_class(info);
    auto it = std::find(impl_->classes.begin(), impl_->classes.end(), cls);
    if (it == impl_->classes.end()) {
      it = impl_->classes.insert(impl_->classes.end(), cls);
      if (impl_->classes.size() == 1) impl_->info = info;
    }
    r->device_class = static_cast<std::size_t>(it - impl_->classes.begin());
    r->alive = true;
  }
  for (auto& r : impl_->ranks) {
    if (!r.alive && refusals.find("rank " + std::to_string(r.rank) + ":") == std::string::npos) {
      impl_->lost.push_back("rank " + std::to_string(r.rank) + ": did not answer");
    }
  }
  if (impl_->classes.empty()) {
    for (auto& r : impl_->ranks) impl_->post(r.rank, kStop, "{}");
    throw Error(ErrorCode::DeviceUnavailable,
                "no MPI rank could evaluate:" + (refusals.empty() ? std::string(" none answered") : refusals));
  }
  impl_->progress = std::thread([this] { impl_->loop(); });
}

MpiEvaluator::~MpiEvaluator() {
  impl_->stopping = true;
  if (impl_->progress.joinable()) impl_->progress.join();
  for (auto& r : impl_->ranks) {
    impl_->post(r.rank, kStop, "{}");  // dead ranks too: a rank we gave up on may merely be slow
  }
  // Live ranks take their stop at once; a dead rank's send never completes and is left behind.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!impl_->sends.empty() && Clock::now() < deadline) {
    impl_->reap_sends();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Evaluation MpiEvaluator::evaluate(const Candidate& candidate, std::uint64_t input_seed) {
  return impl_->submit(candidate, input_seed, -1);
}

Evaluation MpiEvaluator::evaluate_on(std::size_t device_class_index, const Candidate& candidate,
                                     std::uint64_t input_seed) {
  if (device_class_index >= impl_->classes.size())
    throw Error(ErrorCode::BadUsage, "MpiEvaluator: no such device class");
  return impl_->submit(candidate, input_seed, static_cast<long>(device_class_index));
}

DeviceInfo MpiEvaluator::device_info() { return impl_->info; }

std::vector<std::string> MpiEvaluator::device_classes() { return impl_->classes; }

int MpiEvaluator::live_ranks() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<int>(
      std::count_if(impl_->ranks.begin(), impl_->ranks.end(), [](const auto& r) { return r.alive; }));
}

std::vector<std::string> MpiEvaluator::lost_ranks() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->lost;
}

#endif

}  // namespace kernelevolve
