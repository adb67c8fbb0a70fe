#include "pytorch/torch_reference.hpp"

#include <simdjson.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "kernelevolve/error.hpp"
#include "kernelevolve/fitness.hpp"
#include "kernelevolve/json.hpp"

namespace kernelevolve::pytorch {

namespace {

constexpr std::size_t kAlign = 64;

// The module "compiled": the bridge holds it; the kernel says how to run it.
class TorchKernel final : public Kernel {
 public:
  explicit TorchKernel(std::string mode) : mode(std::move(mode)) {}
  std::string mode;  // "reference", "eager" or "compile"
};

}  // namespace

// A piece of the arena: host memory that the bridge maps too.
class ArenaBuffer final : public Buffer {
 public:
  ArenaBuffer(TorchReference* owner, unsigned char* data, std::size_t bytes, std::size_t reserved)
      : owner_(owner), data_(data), bytes_(bytes), reserved_(reserved) {}
  ~ArenaBuffer() override { owner_->release(reserved_); }
  std::size_t bytes() const override { return bytes_; }
  void* data() override { return data_; }
  void upload(const void* host, std::size_t bytes) override { std::memcpy(data_, host, std::min(bytes, bytes_)); }
  void download(void* host, std::size_t bytes) const override { std::memcpy(host, data_, std::min(bytes, bytes_)); }
  void* host_address() const override { return data_; }
  void copy_from(const Buffer& source) override { source.download(data_, std::min(bytes_, source.bytes())); }

 private:
  TorchReference* owner_;
  unsigned char* data_;
  std::size_t bytes_, reserved_;
};

void TorchReference::describe_device() {
  const DeviceInfo& cand = candidate_device_->info();
  if (cand.kind != "cpu" && cand.kind != "cuda") {
    throw Error(ErrorCode::DeviceUnavailable, spec_.path + ": a PyTorch reference runs beside the CPU or a CUDA GPU; " +
                                                  cand.id + " is " + cand.kind);
  }
  info_ = cand;
  info_.id = "pytorch:" + cand.id;
  info_.kind = "pytorch";
}

TorchReference::TorchReference(const Spec& spec, std::shared_ptr<Device> candidate_device, const SharedArena& shared)
    : spec_(spec), candidate_device_(std::move(candidate_device)), socket_(shared.socket_fd) {
  arena_fd_ = shared.memfd;
  describe_device();
  arena_bytes_ = shared.bytes;
  if (socket_ < 0) throw Error(ErrorCode::Internal, "a shared PyTorch reference without a socket to it");
  if (candidate_device_->info().kind == "cuda") {
    device_arena_ = candidate_device_->open_shared(shared.ipc_handle, arena_bytes_);
    if (!device_arena_)
      throw Error(ErrorCode::DeviceUnavailable, candidate_device_->info().id + " cannot open shared memory");
  } else {
    if (arena_fd_ < 0) throw Error(ErrorCode::Internal, "a shared PyTorch reference on the CPU without its arena");
    map_host_arena();
  }
}

TorchReference::TorchReference(const Spec& spec, std::shared_ptr<Device> candidate_device)
    : spec_(spec), candidate_device_(std::move(candidate_device)) {
  describe_device();
  const DeviceInfo& cand = candidate_device_->info();
  // One evaluation's argument blocks at a time: the candidate's (a kernel's on a GPU, where the arena is the
  // device's memory; a baseline's, which runs here, on either) and the reference's. Timed calls rotate their
  // inputs from the reference's block, so no third block is needed (memory_footprint, fitness.hpp).
  arena_bytes_ = std::max<std::size_t>(memory_footprint(spec_, cand).arena_bytes, kAlign);
  std::vector<std::string> bridge_args{"serve", "--module",      spec_.reference.file,        "--device",
                                       cand.id, "--arena-bytes", std::to_string(arena_bytes_)};
  const std::vector<std::string> variant = bridge_problem_args(spec_);
  bridge_args.insert(bridge_args.end(), variant.begin(), variant.end());
  if (cand.kind == "cuda") {
    std::string handle;
    device_arena_ = candidate_device_->allocate_shared(arena_bytes_, handle);
    if (!device_arena_)
      throw Error(ErrorCode::DeviceUnavailable, cand.id + " cannot share memory with PyTorch's process");
    bridge_args.insert(bridge_args.end(), {"--arena-ipc", handle});
    bridge_ = std::make_unique<BridgeProcess>(bridge_args, std::vector<int>{});
  } else {
    open_host_arena();
    bridge_args.insert(bridge_args.end(), {"--arena-fd", "3"});
    bridge_ = std::make_unique<BridgeProcess>(bridge_args, std::vector<int>{arena_fd_});
  }
  const std::string hello = bridge_->greeting();
  if (hello.find("\"ok\": true") == std::string::npos) {
    throw Error(ErrorCode::BadSpec,
                spec_.path + ": reference: the PyTorch module does not load: " + hello + "\n" + bridge_->error_tail());
  }
}

void TorchReference::open_host_arena() {
  arena_fd_ = ::memfd_create("kernelevolve-pytorch-arena", MFD_CLOEXEC);
  if (arena_fd_ < 0 || ::ftruncate(arena_fd_, static_cast<off_t>(arena_bytes_)) != 0) {
    throw Error(ErrorCode::Internal, std::string("the PyTorch reference's shared memory: ") + std::strerror(errno));
  }
  map_host_arena();
}

void TorchReference::map_host_arena() {
  void* map = ::mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd_, 0);
  if (map == MAP_FAILED) throw Error(ErrorCode::Internal, std::string("mmap: ") + std::strerror(errno));
  arena_ = static_cast<unsigned char*>(map);
}

TorchReference::~TorchReference() {
  bridge_.reset();                     // the bridge first: it maps the arena
  if (socket_ >= 0) ::close(socket_);  // a shared bridge sees us gone, and frees the arena if we held it
  device_arena_.reset();
  if (arena_) ::munmap(arena_, arena_bytes_);
  if (arena_fd_ >= 0) ::close(arena_fd_);
}

const DeviceInfo& TorchReference::info() { return info_; }

CompileResult TorchReference::compile(const KernelSource& source) {
  CompileResult r;
  std::string mode = "reference";
  if (source.language == Language::pytorch) {
    mode = source.source;
    if (mode != "eager" && mode != "compile") {
      r.refused = true;
      r.log = "error: a PyTorch baseline is \"eager\" or \"compile\", not \"" + source.source.substr(0, 40) + "\"\n";
      return r;
    }
    const std::string why = ask("{\"op\": \"prepare\", \"mode\": " + json_quote(mode) + "}");
    if (!why.empty()) {
      r.log = "error: " + why + "\n";
      return r;
    }
  }
  r.kernel = std::make_shared<TorchKernel>(mode);
  r.log = "PyTorch module " + spec_.reference.file + (mode == "reference" ? "" : " (" + mode + ")") + "\n";
  return r;
}

std::unique_ptr<Buffer> TorchReference::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const ArenaSlot slot = arena_slot(bytes);
  const std::size_t reserved = slot.reserved;
  if (shared() && !holding_) {
    // Until the arena is ours: the other workers' evaluations use it in turn.
    const std::string why = ask("{\"op\": \"acquire\"}");
    if (!why.empty()) throw Error(ErrorCode::Internal, "the shared PyTorch reference refused its arena: " + why);
    holding_ = true;
  }
  if (arena_used_ + reserved > arena_bytes_) {
    throw Error(ErrorCode::Internal, "the PyTorch reference's shared memory (" + std::to_string(arena_bytes_) +
                                         " bytes) is full: one evaluation's buffers were expected to fit");
  }
  const std::size_t at = arena_used_ + slot.front;
  arena_used_ += reserved;
  high_water_ = std::max(high_water_, arena_used_);
  live_buffers_ += 1;
  if (device_arena_) {
    auto view = candidate_device_->view(
        *device_arena_, at, bytes, [this, reserved] { release(reserved); }, slot.front, slot.back);
    if (!view) throw Error(ErrorCode::Internal, "the PyTorch reference's arena: the device made no view of it");
    return view;
  }
  return std::make_unique<ArenaBuffer>(this, arena_ + at, bytes, reserved);
}

std::size_t TorchReference::offset_of(const void* data) const {
  const auto* base = device_arena_ ? static_cast<const unsigned char*>(device_arena_->data()) : arena_;
  return static_cast<std::size_t>(static_cast<const unsigned char*>(data) - base);
}

bool TorchReference::healthy() const { return candidate_device_->healthy(); }

bool TorchReference::fill_random(Buffer& buffer, DType dtype, std::size_t count, const InputDist& dist,
                                 std::uint64_t seed) {
  return device_arena_ && candidate_device_->fill_random(buffer, dtype, count, dist, seed);
}

bool TorchReference::compare(const Buffer& got, const Buffer& expected, DType dtype, std::size_t count,
                             const Tolerance& tol, Comparison& result) {
  return device_arena_ && candidate_device_->compare(got, expected, dtype, count, tol, result);
}

bool TorchReference::digest(const Buffer& buffer, std::size_t bytes, std::uint64_t& result) {
  return device_arena_ && candidate_device_->digest(buffer, bytes, result);
}

void TorchReference::release(std::size_t) {
  std::lock_guard lock(mutex_);
  if (--live_buffers_ != 0) return;
  // One evaluation's blocks at a time: all of it is free again. On the CPU, what lies past the first block
  // (only a baseline's evaluation reaches it) goes back to the system: a kernel's evaluation never touches it.
  // The bridge does it: the worker, confined, may not (its sandbox denies fallocate and madvise's removal).
  if (arena_fd_ >= 0 && high_water_ > arena_bytes_ / 2 && (bridge_ || holding_)) {
    try {
      (void)ask("{\"op\": \"release\", \"from\": " + std::to_string(arena_bytes_ / 2) + "}");
    } catch (const std::exception&) {
      // Memory kept is no error: the next evaluation reuses it.
    }
  }
  arena_used_ = 0;
  high_water_ = 0;
  if (holding_) {
    holding_ = false;
    try {
      (void)ask("{\"op\": \"yield\"}");
    } catch (const std::exception&) {
      // The bridge is gone: the next request says so where it can be reported.
    }
  }
}

std::string TorchReference::request(const std::string& line) {
  if (bridge_) return bridge_->request(line);
  const std::string out = line + "\n";
  for (std::size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::write(socket_, out.data() + sent, out.size() - sent);  // SIGPIPE is ignored in a worker
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorCode::Internal,
                  "the shared PyTorch reference process has ended (" + std::string(std::strerror(errno)) + ")");
    sent += static_cast<std::size_t>(n);
  }
  for (;;) {
    if (const auto end = pending_.find('\n'); end != std::string::npos) {
      std::string reply = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return reply;
    }
    char chunk[4096];
    const ssize_t n = ::read(socket_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorCode::Internal, "the shared PyTorch reference process has ended while answering");
    pending_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string TorchReference::views_request(void** args, bool outputs) const {
  Bindings sizes;
  for (std::size_t i = 0; i < spec_.params.size(); ++i) {
    const Param& p = spec_.params[i];
    if (p.role != Role::size) continue;
    std::int64_t v = 0;
    switch (p.dtype) {
      case DType::i32: {
        std::int32_t x;
        std::memcpy(&x, args[i], 4);
        v = x;
        break;
      }
      case DType::i8: {
        std::int8_t x;
        std::memcpy(&x, args[i], 1);
        v = x;
        break;
      }
      case DType::u8: {
        std::uint8_t x;
        std::memcpy(&x, args[i], 1);
        v = x;
        break;
      }
      default: std::memcpy(&v, args[i], 8);
    }
    sizes[p.name] = v;
  }
  std::ostringstream out;
  out << "\"sizes\": {";
  bool first = true;
  for (const auto& [name, v] : sizes) out << (first ? "" : ", ") << json_quote(name) << ": " << v, first = false;
  out << "}, \"views\": {";
  first = true;
  for (std::size_t i = 0; i < spec_.params.size(); ++i) {
    const Param& p = spec_.params[i];
    if (!p.is_buffer()) continue;
    const void* data = *static_cast<void* const*>(args[i]);
    out << (first ? "" : ", ") << json_quote(p.name) << ": [" << offset_of(data) << ", "
        << json_quote(to_string(p.dtype)) << ", [";
    first = false;
    for (std::size_t d = 0; d < p.shape.size(); ++d) {
      const std::string& dim = p.shape[d];
      out << (d ? ", " : "") << Expr::parse(dim).eval(sizes);
    }
    out << "]]";
  }
  out << "}, \"scalars\": {";
  first = true;
  for (const Param& p : spec_.params) {
    if (p.role != Role::scalar) continue;
    out << (first ? "" : ", ") << json_quote(p.name) << ": ";
    if (is_float(p.dtype)) {
      out << p.value;
    } else {
      out << static_cast<std::int64_t>(p.value);
    }
    first = false;
  }
  out << "}";
  if (outputs) {
    out << ", \"outputs\": [";
    first = true;
    for (const Param& p : spec_.params) {
      if (p.role == Role::out || p.role == Role::inout) out << (first ? "" : ", ") << json_quote(p.name), first = false;
    }
    out << "]";
  }
  return out.str();
}

std::string TorchReference::ask(const std::string& request, std::string* reply_out) {
  const std::string reply = this->request(request);
  if (reply_out) *reply_out = reply;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(reply).get(doc) != simdjson::SUCCESS) return "the PyTorch bridge answered: " + reply.substr(0, 300);
  bool ok = false;
  if (doc["ok"].get(ok) == simdjson::SUCCESS && ok) return {};
  std::string_view why = "no reason given";
  if (doc["error"].get(why) != simdjson::SUCCESS) why = "no reason given";
  std::string message(why);
  if (std::string_view trace; doc["trace"].get(trace) == simdjson::SUCCESS) message += "\n" + std::string(trace);
  return message;
}

LaunchResult TorchReference::launch(Kernel& kernel, void** args, const LaunchDims&, bool timed, bool flush_cache) {
  LaunchResult r;
  const auto* torch_kernel = dynamic_cast<TorchKernel*>(&kernel);
  const std::string mode = torch_kernel ? torch_kernel->mode : "reference";
  try {
    std::string reply;
    const std::string why =
        ask("{\"op\": \"run\", \"mode\": " + json_quote(mode) + ", \"timed\": " + (timed ? "true" : "false") +
                ", \"flush\": " + (flush_cache ? "true" : "false") + ", " + views_request(args, true) + "}",
            &reply);
    if (!why.empty()) {
      r.ok = false, r.error = "the PyTorch module failed: " + why;
    } else if (timed) {
      simdjson::dom::parser parser;
      simdjson::dom::element doc;
      if (parser.parse(reply).get(doc) != simdjson::SUCCESS || doc["time_us"].get(r.time_us) != simdjson::SUCCESS) {
        r.ok = false, r.error = "the PyTorch bridge gave no time: " + reply.substr(0, 200);
      } else if (doc["host_us"].get(r.host_us) != simdjson::SUCCESS) {
        r.host_us = 0;
      }
    }
  } catch (const Error& e) {
    r.ok = false;
    r.error = e.what();
  }
  return r;
}

std::string TorchReference::run_float64(void** args) {
  try {
    return ask("{\"op\": \"run\", \"mode\": \"reference64\", \"timed\": false, \"flush\": false, " +
               views_request(args, true) + "}");
  } catch (const std::exception& e) {
    return e.what();
  }
}

void TorchReference::draw(void** args, std::uint64_t seed) {
  // Python's random seeds are at most 2^63 - 1 in torch.manual_seed.
  std::string reply;
  const std::string why = ask(
      "{\"op\": \"draw\", \"seed\": " + std::to_string(seed >> 1) + ", " + views_request(args, false) + "}", &reply);
  if (!why.empty())
    throw Error(ErrorCode::BadSpec, spec_.path + ": reference: the problem's get_inputs() failed: " + why);
  ranges_.clear();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object ranges;
  if (parser.parse(reply).get(doc) != simdjson::SUCCESS || doc["ranges"].get(ranges) != simdjson::SUCCESS) return;
  for (auto [name, value] : ranges) {
    simdjson::dom::array pair;
    double lo = 0, hi = 0;
    if (value.get(pair) == simdjson::SUCCESS && pair.size() == 2 && pair.at(0).get(lo) == simdjson::SUCCESS &&
        pair.at(1).get(hi) == simdjson::SUCCESS && lo <= hi)
      ranges_[std::string(name)] = {lo, hi};
  }
}

}  // namespace kernelevolve::pytorch
