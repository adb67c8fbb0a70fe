// cuBLASLt, cuBLAS and cuDNN as a program's steps on a CUDA GPU (library_steps.hpp).
#include "devices/cuda/library_steps.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "core/subprocess.hpp"
#include "devices/cuda/vendor_libraries.hpp"

namespace kernelevolve::cuda {
namespace {

// The workspace each call is given: cuBLASLt's recommendation, and for cuDNN enough for the faster
// convolution algorithms (one that needs more is passed over for one that fits).
constexpr std::size_t kConvWorkspaceBytes = std::size_t{64} << 20;

std::uint64_t pointer_arg(void** args, std::size_t i) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(*static_cast<void* const*>(args[i])));
}

std::int64_t integer_arg(void** args, std::size_t i, DType dtype) {
  switch (dtype) {
    case DType::i32: {
      std::int32_t v;
      std::memcpy(&v, args[i], 4);
      return v;
    }
    case DType::i8: {
      std::int8_t v;
      std::memcpy(&v, args[i], 1);
      return v;
    }
    case DType::u8: {
      std::uint8_t v;
      std::memcpy(&v, args[i], 1);
      return v;
    }
    case DType::i64: {
      std::int64_t v;
      std::memcpy(&v, args[i], 8);
      return v;
    }
    default: return 0;
  }
}

bool is_integer_type(DType d) { return d == DType::i32 || d == DType::i64 || d == DType::i8 || d == DType::u8; }

// "2" or "2,3" (height, width).
bool parse_pair(const std::string& text, std::int64_t& a, std::int64_t& b) {
  char* end = nullptr;
  a = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str()) return false;
  if (*end == '\0') return b = a, true;
  if (*end != ',') return false;
  const char* rest = end + 1;
  b = std::strtoll(rest, &end, 10);
  return end != rest && *end == '\0';
}

class LibraryStep : public gpu::LibraryKernel {
 public:
  LibraryStep(gpu::GpuDevice& device, std::vector<Param> signature, std::size_t workspace_bytes)
      : gpu::LibraryKernel(&device), signature_(std::move(signature)) {
    if (workspace_bytes) workspace_ = device.allocate(workspace_bytes);
  }
  std::map<std::string, std::int64_t> resources() const override { return {{"library", 1}}; }

 protected:
  std::uint64_t ptr(void** args, std::size_t i) const { return pointer_arg(args, i); }
  std::int64_t value(void** args, std::size_t i) const { return integer_arg(args, i, signature_[i].dtype); }
  std::uint64_t workspace() const {
    return workspace_ ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(workspace_->data())) : 0;
  }
  std::size_t workspace_bytes() const { return workspace_ ? workspace_->bytes() : 0; }
  // Whether buffer argument i holds `elements` of its dtype.
  std::string fits(const std::vector<std::size_t>& bytes, std::size_t i, std::int64_t elements,
                   const char* what) const {
    const std::size_t need = static_cast<std::size_t>(elements) * dtype_size(signature_[i].dtype);
    if (elements >= 0 && need <= bytes[i]) return "";
    return std::string(what) + " '" + signature_[i].name + "' holds " + std::to_string(bytes[i]) +
           " bytes; the call would touch " + std::to_string(need);
  }
  std::vector<Param> signature_;

 private:
  std::unique_ptr<Buffer> workspace_;
};

// cublaslt.matmul, or cublas.gemm (classic: cuBLAS's GEMM, no epilogue).
class MatmulStep final : public LibraryStep {
 public:
  MatmulStep(gpu::GpuDevice& device, std::vector<Param> signature, MatmulEpilogue epilogue, bool b_transposed,
             bool classic)
      : LibraryStep(device, std::move(signature), matmul_workspace_bytes()),
        epilogue_(epilogue),
        b_transposed_(b_transposed),
        classic_(classic) {}
  std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const override {
    const char* name = classic_ ? "cublas.gemm" : "cublaslt.matmul";
    const std::int64_t m = value(args, 3), n = value(args, 4), k = value(args, 5);
    if (m < 1 || n < 1 || k < 1) {
      return std::string(name) + ": M, N and K must be at least 1 (" + std::to_string(m) + ", " + std::to_string(n) +
             ", " + std::to_string(k) + ")";
    }
    for (const std::string& why : {fits(bytes, 0, m * k, "A"), fits(bytes, 1, k * n, "B"), fits(bytes, 2, m * n, "D"),
                                   signature_.size() > 6 ? fits(bytes, 6, n, "bias") : std::string()}) {
      if (!why.empty()) return name + (": " + why);
    }
    return "";
  }
  std::string enqueue(void* stream, void** args) override {
    MatmulCall call;
    call.m = value(args, 3), call.n = value(args, 4), call.k = value(args, 5);
    call.dtype = to_string(signature_[0].dtype);
    call.b_transposed = b_transposed_;
    call.epilogue = epilogue_;
    call.a = ptr(args, 0), call.b = ptr(args, 1), call.d = ptr(args, 2);
    if (signature_.size() > 6) call.bias = ptr(args, 6);
    call.workspace = workspace(), call.workspace_bytes = workspace_bytes();
    return classic_ ? gemm(stream, call) : matmul(stream, call);
  }

 private:
  MatmulEpilogue epilogue_;
  bool b_transposed_;
  bool classic_;
};

class ConvStep final : public LibraryStep {
 public:
  ConvStep(gpu::GpuDevice& device, std::vector<Param> signature, const ConvCall& options)
      : LibraryStep(device, std::move(signature), kConvWorkspaceBytes), options_(options) {}
  ConvCall call(void** args) const {
    ConvCall c = options_;
    c.dtype = to_string(signature_[0].dtype);
    c.n = value(args, 3), c.c = value(args, 4), c.h = value(args, 5), c.w = value(args, 6);
    c.k = value(args, 7), c.r = value(args, 8), c.s = value(args, 9);
    c.x = ptr(args, 0), c.filter = ptr(args, 1), c.y = ptr(args, 2);
    if (signature_.size() > 10) c.bias = ptr(args, 10);
    c.workspace = workspace(), c.workspace_bytes = workspace_bytes();
    return c;
  }
  std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const override {
    const ConvCall c = call(args);
    std::int64_t p = 0, q = 0;
    if (!conv_output_size(c, p, q)) {
      return "cudnn.conv2d: no output for these sizes (N, C, H, W, K, R, S, stride, padding, dilation, groups)";
    }
    for (const std::string& why :
         {fits(bytes, 0, c.n * c.c * c.h * c.w, "x"), fits(bytes, 1, c.k * (c.c / c.groups) * c.r * c.s, "w"),
          fits(bytes, 2, c.n * c.k * p * q, "y"),
          signature_.size() > 10 ? fits(bytes, 10, c.k, "bias") : std::string()}) {
      if (!why.empty()) return "cudnn.conv2d: " + why;
    }
    return "";
  }
  std::string enqueue(void* stream, void** args) override { return conv2d(stream, call(args)); }

 private:
  ConvCall options_;
};

// Checks that the signature is `buffers` buffers of one float dtype, then `integers` integers, then
// `optional` more buffers of that dtype at most.
std::string check_signature(const std::string& name, const std::vector<Param>& sig, std::size_t buffers,
                            std::size_t integers, std::size_t optional, const char* layout) {
  const std::string usage = name + " takes " + layout;
  if (sig.size() < buffers + integers || sig.size() > buffers + integers + optional) {
    return usage + ": " + std::to_string(sig.size()) + " argument(s) given";
  }
  const DType dtype = sig[0].dtype;
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    return name + ": its buffers must be f32, f16 or bf16, not " + to_string(dtype);
  }
  for (std::size_t i = 0; i < sig.size(); ++i) {
    const bool buffer = i < buffers || i >= buffers + integers;
    if (buffer && (!sig[i].is_buffer() || sig[i].dtype != dtype)) {
      return usage + ": argument " + std::to_string(i + 1) + " ('" + sig[i].name + "') must be a " + to_string(dtype) +
             " buffer, like the first";
    }
    if (!buffer && (sig[i].is_buffer() || !is_integer_type(sig[i].dtype))) {
      return usage + ": argument " + std::to_string(i + 1) + " ('" + sig[i].name + "') must be an integer";
    }
  }
  return "";
}

}  // namespace

std::vector<std::string> find_vendor_library_dirs();

std::vector<std::string> vendor_library_dirs() {
  // Asked once: Python's start costs more than a compile.
  static std::once_flag once;
  static std::vector<std::string> found;
  std::call_once(once, [] { found = find_vendor_library_dirs(); });
  return found;
}

std::vector<std::string> find_vendor_library_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KE_VENDOR_LIB_DIRS")) {
    std::stringstream list(env);
    for (std::string dir; std::getline(list, dir, ':');)
      if (!dir.empty()) dirs.push_back(dir);
  }
  const char* python = std::getenv("KE_PYTHON");
  const std::string interpreter = python && *python ? python : "python3";
  const ProcessResult r = run_shell(shell_quote(interpreter) +
                                        " -c 'import glob, importlib.util, os\n"
                                        "s = importlib.util.find_spec(\"nvidia\")\n"
                                        "for p in (s.submodule_search_locations if s else []):\n"
                                        "    print(\"\\n\".join(sorted(glob.glob(os.path.join(p, \"*\", \"lib\")))))'",
                                    "", 30);
  std::stringstream out(r.exit_code == 0 ? r.out : std::string());
  for (std::string dir; std::getline(out, dir);)
    if (!dir.empty()) dirs.push_back(dir);
  return dirs;
}

std::string prepare_vendor_libraries(gpu::GpuDevice& device, void* stream) {
  static std::once_flag once;
  static std::string report;
  std::call_once(once, [&] {
    const std::vector<std::string> dirs = vendor_library_dirs();
    const LibraryLoad blas = load_cublaslt(dirs);
    const LibraryLoad classic = load_cublas(dirs);
    const LibraryLoad dnn = load_cudnn(dirs);
    report = "cuBLASLt: " + (blas.ok ? blas.path : "not loaded: " + blas.why) + "\n" +
             "cuBLAS: " + (classic.ok ? classic.path : "not loaded: " + classic.why) + "\n" +
             "cuDNN: " + (dnn.ok ? dnn.path : "not loaded: " + dnn.why) + "\n";
    // One small call of each, so that the handles and whatever the libraries open lazily exist now.
    try {
      auto scratch = device.allocate(4096);
      const auto p = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(scratch->data()));
      if (blas.ok) {
        MatmulCall m;
        m.m = m.n = m.k = 4;
        m.a = m.b = m.d = p;
        if (std::string why = matmul(stream, m); !why.empty()) report += "cuBLASLt's first call: " + why + "\n";
      }
      if (classic.ok) {
        MatmulCall m;
        m.m = m.n = m.k = 4;
        m.a = m.b = m.d = p;
        if (std::string why = gemm(stream, m); !why.empty()) report += "cuBLAS's first call: " + why + "\n";
      }
      if (dnn.ok) {
        ConvCall c;
        c.n = c.c = c.k = 1;
        c.h = c.w = 4;
        c.r = c.s = 3;
        c.pad_h = c.pad_w = 1;
        c.x = c.filter = c.y = p;
        if (std::string why = conv2d(stream, c); !why.empty()) report += "cuDNN's first call: " + why + "\n";
      }
    } catch (const std::exception& e) {
      report += std::string("the libraries' first calls: ") + e.what() + "\n";
    }
  });
  return report;
}

std::shared_ptr<Kernel> make_library_step(gpu::GpuDevice& device, const std::string& name,
                                          const std::map<std::string, std::string>& options,
                                          const std::vector<Param>& signature, std::string& log) {
  auto error = [&](const std::string& why) -> std::shared_ptr<Kernel> {
    log += "error: " + why + "\n";
    return nullptr;
  };
  try {
    if (name == "cublaslt.matmul" || name == "cublas.gemm") {
      const bool classic = name == "cublas.gemm";  // cuBLAS's GEMM: no epilogue
      MatmulEpilogue epilogue = MatmulEpilogue::none;
      bool transposed = false;
      for (const auto& [key, text] : options) {
        if (key == "epilogue" && !classic) {
          const auto e = parse_epilogue(text);
          if (!e)
            return error("cublaslt.matmul: epilogue '" + text +
                         "' is not none, relu, gelu, bias, bias_relu or bias_gelu");
          epilogue = *e;
        } else if (key == "b_transposed") {
          if (text != "true" && text != "false") return error(name + ": b_transposed is \"true\" or \"false\"");
          transposed = text == "true";
        } else {
          return error(name + " has no option '" + key + "' " +
                       (classic ? "(b_transposed; cublaslt.matmul has epilogues)" : "(epilogue, b_transposed)"));
        }
      }
      const bool bias = epilogue == MatmulEpilogue::bias || epilogue == MatmulEpilogue::bias_relu ||
                        epilogue == MatmulEpilogue::bias_gelu;
      if (std::string why = check_signature(name, signature, 3, 3, bias ? 1 : 0,
                                            bias ? "A, B, D, M, N, K, bias" : "A, B, D, M, N, K");
          !why.empty())
        return error(why);
      if (bias && signature.size() != 7)
        return error(std::string("cublaslt.matmul: the epilogue ") + to_string(epilogue) + " needs a bias");
      const LibraryLoad load = classic ? load_cublas(vendor_library_dirs()) : load_cublaslt(vendor_library_dirs());
      if (!load.ok) return error(std::string(classic ? "cuBLAS" : "cuBLASLt") + " cannot be loaded: " + load.why);
      return std::make_shared<MatmulStep>(device, signature, epilogue, transposed, classic);
    }
    if (name == "cudnn.conv2d") {
      ConvCall c;
      for (const auto& [key, text] : options) {
        bool ok = true;
        if (key == "stride") ok = parse_pair(text, c.stride_h, c.stride_w);
        else if (key == "padding") ok = parse_pair(text, c.pad_h, c.pad_w);
        else if (key == "dilation") ok = parse_pair(text, c.dil_h, c.dil_w);
        else if (key == "groups") {
          std::int64_t unused = 0;
          ok = parse_pair(text, c.groups, unused) && text.find(',') == std::string::npos;
        } else {
          return error("cudnn.conv2d has no option '" + key + "' (stride, padding, dilation, groups)");
        }
        if (!ok) return error("cudnn.conv2d: " + key + " '" + text + "' is not an integer (or a pair \"h,w\")");
      }
      if (std::string why = check_signature(name, signature, 3, 7, 1, "x, w, y, N, C, H, W, K, R, S[, bias]");
          !why.empty())
        return error(why);
      const LibraryLoad load = load_cudnn(vendor_library_dirs());
      if (!load.ok) return error("cuDNN cannot be loaded: " + load.why);
      return std::make_shared<ConvStep>(device, signature, c);
    }
  } catch (const std::exception& e) {
    return error(name + ": " + e.what());
  }
  return error("no library call '" + name + "' on a CUDA GPU");
}

}  // namespace kernelevolve::cuda
