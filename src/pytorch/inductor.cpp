// The first program from torch.compile (pytorch.hpp, seed_from_torch_compile): the capture and translation run in
// a Python process of their own (kInductorPackage: the package src/pytorch/ke_inductor, run as `python -m
// ke_inductor`), as the bridge does; its reply becomes the spec's seed, tunables and constraints.
#include <simdjson.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/script_process.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/pytorch.hpp"
#include "pytorch/python.hpp"

namespace kernelevolve {

namespace pytorch {
extern const PythonPackage kInductorPackage;
}

namespace {

// The spec as the translator reads it, in a file of its own (a module's source inline can outgrow argv).
class SpecFile {
 public:
  explicit SpecFile(const Spec& spec) {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/kernelevolve-inductor-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw Error(ErrorCode::Internal, "cannot make a temporary file for torch.compile's capture");
    ::close(fd);
    path_ = pattern;
    std::ofstream out(path_, std::ios::binary);
    out << to_json(spec);
    if (!out) throw Error(ErrorCode::Internal, "cannot write " + path_);
  }
  ~SpecFile() { std::remove(path_.c_str()); }
  SpecFile(const SpecFile&) = delete;
  SpecFile& operator=(const SpecFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void seed_from_torch_compile(Spec& spec, const std::string& device, double timeout_s) {
  const std::string where = (spec.path.empty() ? spec.name : spec.path) + ": the first program from torch.compile";
  if (!spec.reference.pytorch)
    throw Error(ErrorCode::BadUsage, where + ": the problem is not a PyTorch module (it has nothing to compile)");
  // On a GPU Inductor writes Triton; on the CPU, C++ kernels, captured scalar and on one thread so that they stand
  // alone (src/pytorch/ke_inductor/cpu.py says why).
  const bool on_cpu = device.rfind("cpu", 0) == 0;
  if (on_cpu && spec.language != Language::cpp)
    throw Error(ErrorCode::BadUsage, where + ": on the CPU Inductor writes C++: the problem's language must be cpp");
  if (!on_cpu && spec.language != Language::triton)
    throw Error(ErrorCode::BadUsage, where + ": Inductor writes Triton: the problem's language must be triton");
  if (spec.reference.backward)
    throw Error(ErrorCode::BadUsage, where + " translates the module's forward; this problem is " +
                                         pytorch_variant_text(spec.reference) +
                                         ": give it a seed (--seed-kernel) or a model (--mutator llm|mix)");
  if (!on_cpu && device.rfind("cuda", 0) != 0)
    throw Error(ErrorCode::BadUsage, where + " is captured on a CUDA GPU or the CPU, not on " + device);
  if (on_cpu && spec.reference.dtype)
    throw Error(ErrorCode::BadUsage, where + " on the CPU translates f32 and f64 kernels; this problem is " +
                                         pytorch_variant_text(spec.reference) +
                                         ": give it a seed (--seed-kernel) or a model (--mutator llm|mix)");
  const SpecFile file(spec);
  const std::string capture_device = on_cpu ? "cpu" : device;
  std::vector<std::string> args = {"--module", spec.reference.file, "--device", capture_device, "--spec", file.path()};
  // A bf16 or fp16 problem: the module and its float inputs cast as its reference casts them, so that Inductor
  // writes the program of that dtype (cuBLAS's bf16 GEMM, kernels loading bf16).
  if (spec.reference.dtype) args.insert(args.end(), {"--dtype", to_string(*spec.reference.dtype)});
  const std::string text =
      run_script(pytorch::find_python(), pytorch::kInductorPackage, args, timeout_s, "torch.compile's capture");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS)
    throw Error(ErrorCode::Internal, where + ": the capture printed no JSON: " + text.substr(0, 600));
  if (std::string_view why; doc["error"].get(why) == simdjson::SUCCESS) {
    std::string_view part;
    const bool named = doc["part"].get(part) == simdjson::SUCCESS && part == "torch";
    throw Error(named ? ErrorCode::DeviceUnavailable : ErrorCode::BadSpec, where + ": " + std::string(why));
  }
  spec.seed = SourceRef{};
  spec.seed.source = std::string(doc["source"].get_string().value());
  spec.seed.file = "torch.compile (Inductor)";
  spec.tunables.clear();
  for (auto [name, values] : doc["tunables"].get_object()) {
    std::vector<std::int64_t>& list = spec.tunables[std::string(name)];
    for (simdjson::dom::element v : values.get_array()) list.push_back(v.get_int64().value());
  }
  for (simdjson::dom::element c : doc["constraints"].get_array()) {
    const std::string_view text_view = c.get_string().value();
    spec.constraints.push_back(Expr::parse(std::string(text_view), where + ": constraint"));
  }
  // Every step of the plan gives its own grid: the spec's one-kernel launch (which read the derived BLOCK) is only
  // the default of a step without one.
  spec.launch = LaunchRule{};
  if (std::string_view notes; doc["notes"].get(notes) == simdjson::SUCCESS)
    spec.notes = std::string(notes) + (spec.notes.empty() ? "" : "\n\n" + spec.notes);
  spec.validate();
}

}  // namespace kernelevolve
