// cuBLASLt, cuBLAS and cuDNN as a program's steps on a CUDA GPU (library_steps.hpp).
#include "devices/cuda/library_steps.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <mutex>
#include <sstream>

#include "core/subprocess.hpp"
#include "devices/cuda/vendor_libraries.hpp"

namespace kernelevolve::cuda {
namespace {

// The workspace each call is given: cuBLASLt's recommendation, and for cuDNN enough for the faster
// convolution algorithms to start with, grown when a size is bound to what its fastest wants, up to cudnn.cpp's
// 256 MiB (one that needs more is passed over for one that fits).
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

// "2", or `count` values "2,3" (height, width) or "1,2,3" (depth, height, width): one value for every dimension,
// or one for each.
bool parse_tuple(const std::string& text, int count, std::int64_t* out) {
  std::vector<std::int64_t> values;
  const char* at = text.c_str();
  for (;;) {
    char* end = nullptr;
    const std::int64_t v = std::strtoll(at, &end, 10);
    if (end == at) return false;
    values.push_back(v);
    if (*end == '\0') break;
    if (*end != ',') return false;
    at = end + 1;
  }
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(count)) return false;
  for (int i = 0; i < count; ++i) out[i] = values.size() == 1 ? values[0] : values[static_cast<std::size_t>(i)];
  return true;
}

class LibraryStep : public gpu::LibraryKernel {
 public:
  LibraryStep(gpu::GpuDevice& device, std::vector<Param> signature, std::size_t workspace_bytes)
      : gpu::LibraryKernel(&device), signature_(std::move(signature)), gpu_(&device) {
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
  // Grows the workspace to `bytes` where it is smaller, when a size is bound (check_arguments): that size's fastest
  // algorithm wants more room than the step was made with. The old buffer is kept, since work queued with it may
  // still run; so memory grows only with the largest size bound. An allocation that fails keeps the old workspace
  // (the call then takes an algorithm that fits it).
  void reserve_workspace(std::size_t bytes) const {
    if (bytes <= workspace_bytes()) return;
    try {
      std::unique_ptr<Buffer> bigger = gpu_->allocate(bytes);
      if (workspace_) retired_.push_back(std::move(workspace_));
      workspace_ = std::move(bigger);
    } catch (const std::exception&) {
    }
  }
  // Whether buffer argument i holds the product of `extents` elements of its dtype. The product is checked: up
  // to five sizes, each below 2^31, may overflow 64 bits.
  std::string fits(const std::vector<std::size_t>& bytes, std::size_t i, std::initializer_list<std::int64_t> extents,
                   const char* what) const {
    std::uint64_t need = dtype_size(signature_[i].dtype);
    bool overflow = false, negative = false;
    for (const std::int64_t e : extents) {
      negative |= e < 0;
      overflow |= __builtin_mul_overflow(need, static_cast<std::uint64_t>(e), &need);
    }
    if (!negative && !overflow && need <= bytes[i]) return "";
    return std::string(what) + " '" + signature_[i].name + "' holds " + std::to_string(bytes[i]) +
           " bytes; the call would touch " + (overflow ? "more than 2^64" : std::to_string(need));
  }
  std::vector<Param> signature_;

 private:
  gpu::GpuDevice* gpu_;
  mutable std::unique_ptr<Buffer> workspace_;
  mutable std::vector<std::unique_ptr<Buffer>> retired_;
};

// cublaslt.matmul, or cublas.gemm and cublas.gemm_batched (classic: cuBLAS's GEMM, no epilogue). A batched step's
// args are A, B, D, BATCH, M, N, K; the others' A, B, D, M, N, K (then cublaslt.matmul's bias).
class MatmulStep final : public LibraryStep {
 public:
  MatmulStep(gpu::GpuDevice& device, std::vector<Param> signature, std::string name, MatmulEpilogue epilogue,
             bool a_transposed, bool b_transposed, bool tf32)
      : LibraryStep(device, std::move(signature), matmul_workspace_bytes()),
        name_(std::move(name)),
        lt_(name_ == "cublaslt.matmul"),
        batched_(name_ == "cublas.gemm_batched"),
        epilogue_(epilogue),
        a_transposed_(a_transposed),
        b_transposed_(b_transposed),
        tf32_(tf32) {}
  std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const override {
    const MatmulCall c = call(args);
    if (c.m < 1 || c.n < 1 || c.k < 1 || c.batch < 1) {
      return name_ +
             (batched_ ? ": BATCH, M, N and K must be at least 1 (" + std::to_string(c.batch) + ", "
                       : ": M, N and K must be at least 1 (") +
             std::to_string(c.m) + ", " + std::to_string(c.n) + ", " + std::to_string(c.k) + ")";
    }
    const std::size_t bias_at = 6;
    for (const std::string& why :
         {fits(bytes, 0, {c.batch, c.m, c.k}, "A"), fits(bytes, 1, {c.batch, c.k, c.n}, "B"),
          fits(bytes, 2, {c.batch, c.m, c.n}, "D"),
          !batched_ && signature_.size() > bias_at ? fits(bytes, bias_at, {c.n}, "bias") : std::string()}) {
      if (!why.empty()) return name_ + ": " + why;
    }
    return "";
  }
  std::string enqueue(void* stream, void** args) override {
    const MatmulCall c = call(args);
    return lt_ ? matmul(stream, c) : gemm(stream, c);
  }

 private:
  MatmulCall call(void** args) const {
    MatmulCall c;
    const std::size_t first = batched_ ? 4 : 3;  // where M is
    if (batched_) c.batch = value(args, 3);
    c.m = value(args, first), c.n = value(args, first + 1), c.k = value(args, first + 2);
    c.dtype = to_string(signature_[0].dtype);
    c.a_transposed = a_transposed_, c.b_transposed = b_transposed_;
    c.epilogue = epilogue_;
    c.tf32 = tf32_;
    c.a = ptr(args, 0), c.b = ptr(args, 1), c.d = ptr(args, 2);
    if (!batched_ && signature_.size() > 6) c.bias = ptr(args, 6);
    c.workspace = workspace(), c.workspace_bytes = workspace_bytes();
    return c;
  }
  std::string name_;
  bool lt_;       // cuBLASLt's matmul, else cuBLAS's GEMM
  bool batched_;  // cublas.gemm_batched: BATCH before M, N, K
  MatmulEpilogue epilogue_;
  bool a_transposed_;
  bool b_transposed_;
  bool tf32_;  // "math": "tf32"
};

// cudnn.conv2d, conv3d, conv_transpose2d and conv_transpose3d: args x, w, y, N, C, (D,) H, W, K, (T,) R, S, then the
// bias if given.
class ConvStep final : public LibraryStep {
 public:
  ConvStep(gpu::GpuDevice& device, std::vector<Param> signature, std::string name, const ConvCall& options)
      : LibraryStep(device, std::move(signature), kConvWorkspaceBytes), name_(std::move(name)), options_(options) {}
  ConvCall call(void** args) const {
    ConvCall c = options_;
    c.dtype = to_string(signature_[0].dtype);
    std::size_t at = 3;
    c.n = value(args, at++), c.c = value(args, at++);
    if (c.spatial_dims == 3) c.d = value(args, at++);
    c.h = value(args, at++), c.w = value(args, at++), c.k = value(args, at++);
    if (c.spatial_dims == 3) c.t = value(args, at++);
    c.r = value(args, at++), c.s = value(args, at++);
    c.x = ptr(args, 0), c.filter = ptr(args, 1), c.y = ptr(args, 2);
    if (signature_.size() > at) c.bias = ptr(args, at);
    c.workspace = workspace(), c.workspace_bytes = workspace_bytes();
    return c;
  }
  std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const override {
    const ConvCall c = call(args);
    std::int64_t o = 0, p = 0, q = 0;
    if (!conv_output_size(c, o, p, q)) {
      return name_ + ": no output for these sizes (" +
             (c.spatial_dims == 3 ? "N, C, D, H, W, K, T, R, S" : "N, C, H, W, K, R, S") +
             ", stride, padding, dilation, groups" + (c.transposed ? ", output_padding below the stride" : "") + ")";
    }
    // The filter holds, per output channel of the forward convolution it belongs to, the input channels of one group.
    const std::int64_t filter_rows = c.transposed ? c.c : c.k, per_group = (c.transposed ? c.k : c.c) / c.groups;
    const std::size_t bias_at = c.spatial_dims == 3 ? 12 : 10;
    for (const std::string& why :
         {fits(bytes, 0, {c.n, c.c, c.d, c.h, c.w}, "x"), fits(bytes, 1, {filter_rows, per_group, c.t, c.r, c.s}, "w"),
          fits(bytes, 2, {c.n, c.k, o, p, q}, "y"),
          signature_.size() > bias_at ? fits(bytes, bias_at, {c.k}, "bias") : std::string()}) {
      if (!why.empty()) return name_ + ": " + why;
    }
    // The 64 MiB the step was made with can leave out a large call's fastest algorithm (a transposed convolution's
    // can want hundreds of MB); the heuristic's fastest within 256 MiB gets its room. 0 (nothing known) changes none.
    reserve_workspace(conv_workspace_bytes(c));
    return "";
  }
  std::string enqueue(void* stream, void** args) override { return convolution(stream, call(args)); }

 private:
  std::string name_;
  ConvCall options_;
};

// cudnn.avg_pool3d: args x, y, N, C, D, H, W.
class PoolStep final : public LibraryStep {
 public:
  PoolStep(gpu::GpuDevice& device, std::vector<Param> signature, const PoolCall& options)
      : LibraryStep(device, std::move(signature), 0), options_(options) {}
  PoolCall call(void** args) const {
    PoolCall c = options_;
    c.dtype = to_string(signature_[0].dtype);
    c.n = value(args, 2), c.c = value(args, 3), c.d = value(args, 4), c.h = value(args, 5), c.w = value(args, 6);
    c.x = ptr(args, 0), c.y = ptr(args, 1);
    return c;
  }
  std::string check_arguments(void** args, const std::vector<std::size_t>& bytes) const override {
    const PoolCall c = call(args);
    std::int64_t o = 0, p = 0, q = 0;
    if (!pool_output_size(c, o, p, q)) {
      return "cudnn.avg_pool3d: no output for these sizes (N, C, D, H, W, kernel_size, stride, padding at most half "
             "its kernel)";
    }
    for (const std::string& why :
         {fits(bytes, 0, {c.n, c.c, c.d, c.h, c.w}, "x"), fits(bytes, 1, {c.n, c.c, o, p, q}, "y")}) {
      if (!why.empty()) return "cudnn.avg_pool3d: " + why;
    }
    return "";
  }
  std::string enqueue(void* stream, void** args) override { return avg_pool3d(stream, call(args)); }

 private:
  PoolCall options_;
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

// A step's "math": "fp32" (the default) or "tf32" into `tf32`; false when the text is neither.
bool parse_math(const std::string& text, bool& tf32) {
  if (text != "fp32" && text != "tf32") return false;
  tf32 = text == "tf32";
  return true;
}

// "" where the math fits the signature's dtype: TF32 is a rounding of f32 data (plan.cpp refuses it first).
std::string check_math(const std::string& name, bool tf32, const std::vector<Param>& signature) {
  if (!tf32 || signature.empty() || signature[0].dtype == DType::f32) return "";
  return name + ": \"math\": \"tf32\" is for f32 data, not " + to_string(signature[0].dtype) +
         " (f16 and bf16 run on tensor cores already)";
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
        m.tf32 = true;  // a step's "math": "tf32" may pick kernels of other families
        if (std::string why = matmul(stream, m); !why.empty()) report += "cuBLASLt's TF32 call: " + why + "\n";
      }
      if (classic.ok) {
        MatmulCall m;
        m.m = m.n = m.k = 4;
        m.a = m.b = m.d = p;
        if (std::string why = gemm(stream, m); !why.empty()) report += "cuBLAS's first call: " + why + "\n";
        m.batch = 2;  // the strided batched GEMM too (4 KiB holds 2 x 4 x 4 floats)
        if (std::string why = gemm(stream, m); !why.empty()) report += "cuBLAS's batched call: " + why + "\n";
        m.batch = 1;
        m.tf32 = true;
        if (std::string why = gemm(stream, m); !why.empty()) report += "cuBLAS's TF32 call: " + why + "\n";
      }
      if (dnn.ok) {
        ConvCall c;
        c.n = c.c = c.k = 1;
        c.h = c.w = 4;
        c.r = c.s = 3;
        c.pad_h = c.pad_w = 1;
        c.x = c.filter = c.y = p;
        if (std::string why = convolution(stream, c); !why.empty()) report += "cuDNN's first call: " + why + "\n";
        c.tf32 = true;  // the default math's engines (TF32 tensor cores), which "math": "tf32" may take
        if (std::string why = convolution(stream, c); !why.empty()) report += "cuDNN's TF32 call: " + why + "\n";
        c.tf32 = false;
        // The backward-data path a transposed convolution takes, and the Nd one of 3-d: 4x4x4 floats at most.
        c.transposed = true;
        if (std::string why = convolution(stream, c); !why.empty()) report += "cuDNN's transposed call: " + why + "\n";
        c.transposed = false;
        c.spatial_dims = 3;
        c.d = c.t = 3;
        c.pad_d = 1;
        if (std::string why = convolution(stream, c); !why.empty()) report += "cuDNN's 3-d call: " + why + "\n";
        PoolCall pool;
        pool.n = pool.c = 1;
        pool.d = pool.h = pool.w = 4;
        pool.kernel[0] = pool.kernel[1] = pool.kernel[2] = 2;
        pool.stride[0] = pool.stride[1] = pool.stride[2] = 2;
        pool.x = pool.y = p;
        if (std::string why = avg_pool3d(stream, pool); !why.empty()) report += "cuDNN's pooling call: " + why + "\n";
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
    if (name == "cublaslt.matmul" || name == "cublas.gemm" || name == "cublas.gemm_batched") {
      const bool classic = name != "cublaslt.matmul";  // cuBLAS's GEMM: no epilogue
      const bool batched = name == "cublas.gemm_batched";
      MatmulEpilogue epilogue = MatmulEpilogue::none;
      bool a_transposed = false, b_transposed = false, tf32 = false;
      for (const auto& [key, text] : options) {
        if (key == "math") {
          if (!parse_math(text, tf32)) return error(name + ": math '" + text + "' is not \"fp32\" or \"tf32\"");
        } else if (key == "epilogue" && !classic) {
          const auto e = parse_epilogue(text);
          if (!e)
            return error("cublaslt.matmul: epilogue '" + text +
                         "' is not none, relu, gelu, bias, bias_relu or bias_gelu");
          epilogue = *e;
        } else if (key == "b_transposed" || (key == "a_transposed" && classic)) {
          if (text != "true" && text != "false") return error(name + ": " + key + " is \"true\" or \"false\"");
          (key == "a_transposed" ? a_transposed : b_transposed) = text == "true";
        } else {
          return error(name + " has no option '" + key + "' " +
                       (classic ? "(a_transposed, b_transposed, math; cublaslt.matmul has epilogues)"
                                : "(epilogue, b_transposed, math; cublas.gemm has a_transposed)"));
        }
      }
      const bool bias = epilogue == MatmulEpilogue::bias || epilogue == MatmulEpilogue::bias_relu ||
                        epilogue == MatmulEpilogue::bias_gelu;
      const char* layout = batched ? "A, B, D, BATCH, M, N, K" : bias ? "A, B, D, M, N, K, bias" : "A, B, D, M, N, K";
      if (std::string why = check_signature(name, signature, 3, batched ? 4 : 3, bias ? 1 : 0, layout); !why.empty())
        return error(why);
      if (bias && signature.size() != 7)
        return error(std::string("cublaslt.matmul: the epilogue ") + to_string(epilogue) + " needs a bias");
      if (std::string why = check_math(name, tf32, signature); !why.empty()) return error(why);
      const LibraryLoad load = classic ? load_cublas(vendor_library_dirs()) : load_cublaslt(vendor_library_dirs());
      if (!load.ok) return error(std::string(classic ? "cuBLAS" : "cuBLASLt") + " cannot be loaded: " + load.why);
      return std::make_shared<MatmulStep>(device, signature, name, epilogue, a_transposed, b_transposed, tf32);
    }
    if (name == "cudnn.conv2d" || name == "cudnn.conv3d" || name == "cudnn.conv_transpose2d" ||
        name == "cudnn.conv_transpose3d") {
      ConvCall c;
      c.spatial_dims = name.find("3d") != std::string::npos ? 3 : 2;
      c.transposed = name.find("transpose") != std::string::npos;
      const int n = c.spatial_dims;
      const std::string dims = n == 3 ? "\"d,h,w\"" : "\"h,w\"";
      // Each setting for (depth,) height and width, ConvCall's separate fields: a 2-d step leaves the depth's.
      auto setting = [n](const std::string& text, std::int64_t& d, std::int64_t& h, std::int64_t& w) {
        std::int64_t v[3] = {};
        if (!parse_tuple(text, n, v)) return false;
        if (n == 3) d = v[0], h = v[1], w = v[2];
        else h = v[0], w = v[1];
        return true;
      };
      for (const auto& [key, text] : options) {
        bool ok = true;
        if (key == "stride") ok = setting(text, c.stride_d, c.stride_h, c.stride_w);
        else if (key == "padding") ok = setting(text, c.pad_d, c.pad_h, c.pad_w);
        else if (key == "dilation") ok = setting(text, c.dil_d, c.dil_h, c.dil_w);
        else if (key == "output_padding" && c.transposed) ok = setting(text, c.out_pad_d, c.out_pad_h, c.out_pad_w);
        else if (key == "groups") ok = parse_tuple(text, 1, &c.groups);
        else if (key == "math") ok = parse_math(text, c.tf32);
        else {
          return error(name + " has no option '" + key + "' (stride, padding, dilation, " +
                       (c.transposed ? "output_padding, groups, math)" : "groups, math)"));
        }
        if (!ok) {
          return error(name + ": " + key + " '" + text + "' is not " +
                       (key == "groups" ? std::string("an integer")
                        : key == "math" ? std::string("\"fp32\" or \"tf32\"")
                                        : "an integer (or " + dims + ")"));
        }
      }
      const char* layout =
          n == 3 ? "x, w, y, N, C, D, H, W, K, T, R, S[, bias]" : "x, w, y, N, C, H, W, K, R, S[, bias]";
      if (std::string why = check_signature(name, signature, 3, n == 3 ? 9 : 7, 1, layout); !why.empty())
        return error(why);
      if (std::string why = check_math(name, c.tf32, signature); !why.empty()) return error(why);
      const LibraryLoad load = load_cudnn(vendor_library_dirs());
      if (!load.ok) return error("cuDNN cannot be loaded: " + load.why);
      return std::make_shared<ConvStep>(device, signature, name, c);
    }
    if (name == "cudnn.avg_pool3d") {
      PoolCall c;
      bool stride_given = false, kernel_given = false;
      for (const auto& [key, text] : options) {
        bool ok = true;
        if (key == "kernel_size") {
          ok = parse_tuple(text, 3, c.kernel);
          kernel_given = true;
        } else if (key == "stride") {
          ok = parse_tuple(text, 3, c.stride);
          stride_given = true;
        } else if (key == "padding") {
          ok = parse_tuple(text, 3, c.padding);
        } else if (key == "count_include_pad") {
          ok = text == "true" || text == "false";
          c.count_include_pad = text == "true";
        } else {
          return error("cudnn.avg_pool3d has no option '" + key +
                       "' (kernel_size, stride, padding, count_include_pad)");
        }
        if (!ok) {
          return error("cudnn.avg_pool3d: " + key + " '" + text + "' is not " +
                       (key == "count_include_pad" ? "\"true\" or \"false\"" : "an integer (or \"d,h,w\")"));
        }
      }
      if (!kernel_given) return error("cudnn.avg_pool3d needs its kernel_size");
      // As PyTorch's: the stride is the kernel's unless given.
      if (!stride_given) std::copy(std::begin(c.kernel), std::end(c.kernel), std::begin(c.stride));
      if (std::string why = check_signature(name, signature, 2, 5, 0, "x, y, N, C, D, H, W"); !why.empty())
        return error(why);
      const LibraryLoad load = load_cudnn(vendor_library_dirs());
      if (!load.ok) return error("cuDNN cannot be loaded: " + load.why);
      return std::make_shared<PoolStep>(device, signature, c);
    }
  } catch (const std::exception& e) {
    return error(name + ": " + e.what());
  }
  return error("no library call '" + name + "' on a CUDA GPU");
}

}  // namespace kernelevolve::cuda
