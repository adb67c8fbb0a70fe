// CpuDevice: in-process Clang 16 front end (cc1 arguments, EmitLLVMOnlyAction on an in-memory
// buffer) and ORC LLJIT. See cpu_device.hpp for the call convention.
#include "devices/cpu/cpu_device.hpp"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "devices/clock.hpp"
#include "devices/red_zone.hpp"
#include "kernelevolve/error.hpp"

#ifndef KE_CLANG_RESOURCE_DIR
#define KE_CLANG_RESOURCE_DIR "/usr/lib/llvm-16/lib/clang/16"
#endif

namespace kernelevolve {
namespace cpu_detail {
namespace {

using devices::Clock;
using devices::ms_since;

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// What every kernel is compiled with (besides the target): the facts the model's prompt states come from here.
const std::vector<std::string> kOptimizationFlags = {"-O3", "-vectorize-loops", "-vectorize-slp", "-ffp-contract=on"};
std::string language_standard(Language language) { return language == Language::cpp ? "-std=c++17" : "-std=gnu11"; }

// The host's target description, computed once per process.
struct HostTarget {
  std::string triple;
  std::string cpu;
  std::vector<std::string> features;          // "+avx2", ... (enabled features only)
  std::vector<std::string> include_args;      // -internal-isystem ... for C
  std::vector<std::string> cxx_include_args;  // libstdc++ first, then the C ones
};

const HostTarget& host_target() {
  static const HostTarget target = [] {
    HostTarget t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = host_compile_cpu();
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features)) {
      for (const auto& f : features)
        if (f.getValue()) t.features.push_back("+" + f.getKey().str());
      std::sort(t.features.begin(), t.features.end());
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string multiarch = llvm::Triple(t.triple).getArchName().str() + "-linux-gnu";
    // libstdc++: the newest version with both its headers and its target headers present.
    int best = -1;
    for (const auto& entry : fs::directory_iterator("/usr/include/c++", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      if (!fs::exists("/usr/include/" + multiarch + "/c++/" + name, ec)) continue;
      best = std::max(best, std::atoi(name.c_str()));
    }
    if (best >= 0) {
      const std::string v = std::to_string(best);
      for (const std::string& dir : {"/usr/include/c++/" + v, "/usr/include/" + multiarch + "/c++/" + v,
                                     "/usr/include/c++/" + v + "/backward"}) {
        t.cxx_include_args.push_back("-internal-isystem");
        t.cxx_include_args.push_back(dir);
      }
    }
    t.include_args = {"-internal-isystem", std::string(KE_CLANG_RESOURCE_DIR) + "/include", "-internal-isystem",
                      "/usr/local/include"};
    if (fs::exists("/usr/include/" + multiarch, ec)) {
      t.include_args.push_back("-internal-externc-isystem");
      t.include_args.push_back("/usr/include/" + multiarch);
    }
    t.include_args.push_back("-internal-externc-isystem");
    t.include_args.push_back("/usr/include");
    t.cxx_include_args.insert(t.cxx_include_args.end(), t.include_args.begin(), t.include_args.end());
    return t;
  }();
  return target;
}

// Host functions a kernel may call, bound to this process's own addresses. The optimizer
// emits some of them by itself (a zeroing loop becomes memset); the rest are the usual math.
void add_allowlisted_symbols(llvm::orc::LLJIT& jit, llvm::orc::SymbolMap& map) {
  auto add = [&](const char* name, auto* fn) {
    map[jit.mangleAndIntern(name)] = llvm::JITEvaluatedSymbol::fromPointer(
        reinterpret_cast<void*>(fn), llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  };
  using F1 = float (*)(float);
  using F2 = float (*)(float, float);
  using D1 = double (*)(double);
  using D2 = double (*)(double, double);
  add("memset", static_cast<void* (*)(void*, int, size_t)>(&::memset));
  add("memcpy", static_cast<void* (*)(void*, const void*, size_t)>(&::memcpy));
  add("memmove", static_cast<void* (*)(void*, const void*, size_t)>(&::memmove));
  add("memcmp", static_cast<int (*)(const void*, const void*, size_t)>(&::memcmp));
  add("malloc", static_cast<void* (*)(size_t)>(&::malloc));
  add("calloc", static_cast<void* (*)(size_t, size_t)>(&::calloc));
  add("realloc", static_cast<void* (*)(void*, size_t)>(&::realloc));
  add("free", static_cast<void (*)(void*)>(&::free));
  add("aligned_alloc", static_cast<void* (*)(size_t, size_t)>(&::aligned_alloc));
  add("posix_memalign", static_cast<int (*)(void**, size_t, size_t)>(&::posix_memalign));
#define KE_MATH1(name) add(#name "f", static_cast<F1>(&::name##f)), add(#name, static_cast<D1>(&::name))
#define KE_MATH2(name) add(#name "f", static_cast<F2>(&::name##f)), add(#name, static_cast<D2>(&::name))
  KE_MATH1(sqrt);
  KE_MATH1(cbrt);
  KE_MATH1(exp);
  KE_MATH1(exp2);
  KE_MATH1(expm1);
  KE_MATH1(log);
  KE_MATH1(log2);
  KE_MATH1(log10);
  KE_MATH1(log1p);
  KE_MATH1(sin);
  KE_MATH1(cos);
  KE_MATH1(tan);
  KE_MATH1(asin);
  KE_MATH1(acos);
  KE_MATH1(atan);
  KE_MATH1(sinh);
  KE_MATH1(cosh);
  KE_MATH1(tanh);
  KE_MATH1(asinh);
  KE_MATH1(acosh);
  KE_MATH1(atanh);
  KE_MATH1(erf);
  KE_MATH1(erfc);
  KE_MATH1(tgamma);
  KE_MATH1(lgamma);
  KE_MATH1(fabs);
  KE_MATH1(floor);
  KE_MATH1(ceil);
  KE_MATH1(round);
  KE_MATH1(trunc);
  KE_MATH1(rint);
  KE_MATH1(nearbyint);
  KE_MATH2(pow);
  KE_MATH2(atan2);
  KE_MATH2(fmod);
  KE_MATH2(fmax);
  KE_MATH2(fmin);
  KE_MATH2(hypot);
  KE_MATH2(copysign);
  KE_MATH2(remainder);
  KE_MATH2(fdim);
#undef KE_MATH1
#undef KE_MATH2
  add("fmaf", static_cast<float (*)(float, float, float)>(&::fmaf));
  add("fma", static_cast<double (*)(double, double, double)>(&::fma));
  add("ldexpf", static_cast<float (*)(float, int)>(&::ldexpf));
  add("ldexp", static_cast<double (*)(double, int)>(&::ldexp));
  add("sincosf", static_cast<void (*)(float, float*, float*)>(&::sincosf));
  add("sincos", static_cast<void (*)(double, double*, double*)>(&::sincos));
}

// The vector and matrix extensions a kernel author asks about, as enabled on this host ("avx2 fma avx512f ...").
std::string notable_features() {
  static const char* const notable[] = {"sse4.2",     "avx",        "avx2",       "fma",      "f16c",
                                        "avx512f",    "avx512dq",   "avx512bw",   "avx512vl", "avx512cd",
                                        "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni",  "amx-tile",
                                        "amx-bf16",   "amx-int8",   "neon",       "sve",      "sve2"};
  const HostTarget& host = host_target();
  std::string out;
  for (const char* f : notable) {
    if (std::binary_search(host.features.begin(), host.features.end(), std::string("+") + f)) {
      out += (out.empty() ? "" : " ") + std::string(f);
    }
  }
  return out.empty() ? "none beyond the base instruction set" : out;
}

// Process symbols a kernel must never reach even though the process exports them: ending or
// replacing the process. (The worker process is the real fence; this only stops the obvious.)
bool is_denied_process_symbol(llvm::StringRef name) {
  static const std::set<std::string, std::less<>> denied = {
      "exit",   "_exit",     "_Exit",   "quick_exit",  "atexit",       "at_quick_exit", "fork",   "vfork",
      "clone",  "system",    "popen",   "execl",       "execle",       "execlp",        "execv",  "execve",
      "execvp", "execvpe",   "fexecve", "posix_spawn", "posix_spawnp", "kill",          "killpg", "raise",
      "signal", "sigaction", "setuid",  "setgid",      "chroot",       "ptrace",        "reboot"};
  return denied.count(name) != 0;
}

}  // namespace

// One LLJIT: a JITDylib "ke_host" with the allowlisted host symbols and a filtered generator over
// the process, and one JITDylib per compiled module, linked against ke_host. All JIT calls happen
// under `mutex`, so compile() may run from several threads and kernels may die on any thread.
class JitEngine {
 public:
  static llvm::Expected<std::shared_ptr<JitEngine>> create() {
    init_llvm_once();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) return jtmb.takeError();
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    jtmb->setRelocationModel(llvm::Reloc::PIC_);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) return jit.takeError();
    auto engine = std::shared_ptr<JitEngine>(new JitEngine());
    engine->jit = std::move(*jit);
    JitEngine* raw = engine.get();
    engine->jit->getExecutionSession().setErrorReporter([raw](llvm::Error err) {
      std::string text = llvm::toString(std::move(err));
      std::lock_guard<std::mutex> lock(raw->errors_mutex);
      raw->session_errors += text + "\n";
    });
    auto& es = engine->jit->getExecutionSession();
    engine->host = &es.createBareJITDylib("ke_host");
    llvm::orc::SymbolMap allowed;
    add_allowlisted_symbols(*engine->jit, allowed);
    if (auto err = engine->host->define(llvm::orc::absoluteSymbols(std::move(allowed)))) return err;
    auto generator = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        engine->jit->getDataLayout().getGlobalPrefix(),
        [](const llvm::orc::SymbolStringPtr& name) { return !is_denied_process_symbol(*name); });
    if (!generator) return generator.takeError();
    engine->host->addGenerator(std::move(*generator));
    return engine;
  }

  // The JIT goes first: tearing it down may still report errors into session_errors.
  ~JitEngine() { jit.reset(); }

  std::string take_session_errors() {
    std::lock_guard<std::mutex> lock(errors_mutex);
    std::string out;
    out.swap(session_errors);
    return out;
  }

  std::mutex mutex;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  llvm::orc::JITDylib* host = nullptr;
  std::uint64_t next_module = 0;

 private:
  JitEngine() = default;
  std::mutex errors_mutex;
  std::string session_errors;
};

namespace {

using Trampoline = void (*)(void**);

// A loaded module. Its code lives until the last handle is gone (the cache may drop it earlier).
class CpuKernel final : public Kernel {
 public:
  CpuKernel(std::shared_ptr<JitEngine> engine, llvm::orc::JITDylib* dylib, bool with_platform, Trampoline call,
            std::size_t params)
      : engine_(std::move(engine)), dylib_(dylib), with_platform_(with_platform), call_(call), params_(params) {}
  ~CpuKernel() override {
    std::lock_guard<std::mutex> lock(engine_->mutex);
    if (with_platform_) llvm::consumeError(engine_->jit->deinitialize(*dylib_));
    llvm::consumeError(engine_->jit->getExecutionSession().removeJITDylib(*dylib_));
    engine_->take_session_errors();
  }
  std::map<std::string, std::int64_t> resources() const override {
    return {{"params", static_cast<std::int64_t>(params_)}};
  }
  void run(void** args) const { call_(args); }

 private:
  std::shared_ptr<JitEngine> engine_;
  llvm::orc::JITDylib* dylib_;
  bool with_platform_;  // set up by LLJIT's platform: static constructors and destructors run
  Trampoline call_;
  std::size_t params_;
};

// What every C and C++ kernel is given, before its own first line (which `#line 1` keeps line 1): bf16
// conversions. Clang 16 has __bf16 as a storage type only (no arithmetic, no casts), and a bf16 problem's
// buffers are __bf16; _Float16 is arithmetic already. Rounds to nearest even, as PyTorch's .to(bfloat16).
constexpr const char* kKernelPrelude =
    "static inline __attribute__((unused)) float ke_bf16_to_float(__bf16 x) {\n"
    "  unsigned short b;\n  __builtin_memcpy(&b, &x, 2);\n  unsigned int u = (unsigned int)b << 16;\n"
    "  float f;\n  __builtin_memcpy(&f, &u, 4);\n  return f;\n}\n"
    "static inline __attribute__((unused)) __bf16 ke_float_to_bf16(float f) {\n"
    "  unsigned int u;\n  __builtin_memcpy(&u, &f, 4);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x400000u;\n  else u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  unsigned short b = (unsigned short)(u >> 16);\n  __bf16 r;\n  __builtin_memcpy(&r, &b, 2);\n  return r;\n}\n"
    "#line 1\n";

constexpr const char* kTrampolineName = "__ke_trampoline";
constexpr const char* kTrampolineFile = "<ke-trampoline>";

// The source appended after the user's: a `void __ke_trampoline(void** args)` that unpacks each
// argument as the param's C type and calls the entry. Appended (not prepended) so the user's line
// numbers are unchanged; #line names it in diagnostics.
std::string trampoline_source(const KernelSource& ks) {
  const bool cpp = ks.language == Language::cpp;
  std::ostringstream out;
  out << "\n#line 1 \"" << kTrampolineFile << "\"\n#include <stddef.h>\n#include <stdint.h>\n";
  if (cpp) {
    out << "namespace {\nstruct __ke_ptr {\n  void* p;\n"
           "  template <class T> operator T*() const { return static_cast<T*>(p); }\n};\n}\n"
           "extern \"C\" ";
  }
  out << "void " << kTrampolineName << "(void** __ke_args) {\n  " << ks.entry << "(";
  for (std::size_t i = 0; i < ks.params.size(); ++i) {
    const Param& p = ks.params[i];
    if (i) out << ", ";
    if (p.is_buffer()) {
      if (cpp) out << "__ke_ptr{*(void* const*)__ke_args[" << i << "]}";
      else out << "*(void* const*)__ke_args[" << i << "]";
    } else {
      out << "*(const " << c_type(p.dtype) << "*)__ke_args[" << i << "]";
    }
  }
  out << ");\n}\n";
  return out.str();
}

std::string cache_key(const KernelSource& ks) {
  std::ostringstream key;
  key << to_string(ks.language) << '\0' << ks.entry << '\0';
  for (const auto& p : ks.params) key << p.name << ':' << to_string(p.dtype) << ':' << static_cast<int>(p.role) << ';';
  key << '\0';
  for (const auto& [name, value] : ks.defines) key << name << '=' << value << ';';
  key << '\0';
  for (const auto& flag : ks.flags) key << flag << '\x1f';
  key << '\0' << ks.source;
  return key.str();
}

struct FrontendResult {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::string log;
};

// Runs the Clang front end and the -O3 middle end on the source; diagnostics go to the log only.
FrontendResult run_frontend(const KernelSource& ks, const std::string& full_source) {
  FrontendResult result;
  llvm::raw_string_ostream log(result.log);
  const HostTarget& host = host_target();
  const bool cpp = ks.language == Language::cpp;
  const std::string file = cpp ? "kernel.cpp" : "kernel.c";

  std::vector<std::string> args = {"-triple", host.triple, "-target-cpu", host.cpu};
  for (const auto& f : host.features) {
    args.push_back("-target-feature");
    args.push_back(f);
  }
  std::vector<std::string> common = kOptimizationFlags;
  common.insert(common.end(),
                {"-mrelocation-model", "pic", "-pic-level", "2", "-fgnuc-version=4.2.1", "-discard-value-names",
                 "-ferror-limit", "20", "-fmessage-length=0", "-resource-dir", KE_CLANG_RESOURCE_DIR, "-Wall"});
  args.insert(args.end(), common.begin(), common.end());
  const auto& includes = cpp ? host.cxx_include_args : host.include_args;
  args.insert(args.end(), includes.begin(), includes.end());
  args.insert(args.end(), {language_standard(ks.language), "-x", cpp ? "c++" : "c"});
  for (const auto& [name, value] : ks.defines) args.push_back("-D" + name + "=" + std::to_string(value));
  args.insert(args.end(), ks.flags.begin(), ks.flags.end());
  args.push_back(file);

  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());

  auto ci = std::make_unique<clang::CompilerInstance>();
  {
    // Diagnostics about the arguments themselves (a bad flag from the spec) go to the log too.
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> opts(new clang::DiagnosticOptions());
    clang::TextDiagnosticPrinter printer(log, opts.get());
    clang::DiagnosticsEngine arg_diags(new clang::DiagnosticIDs(), opts, &printer, false);
    if (!clang::CompilerInvocation::CreateFromArgs(ci->getInvocation(), argv, arg_diags) ||
        arg_diags.hasErrorOccurred()) {
      log.flush();
      if (result.log.empty()) result.log = "error: invalid compiler arguments\n";
      return result;
    }
  }
  ci->createDiagnostics(new clang::TextDiagnosticPrinter(log, &ci->getDiagnosticOpts()), true);
  ci->setVerboseOutputStream(log);
  ci->getPreprocessorOpts().addRemappedFile(file, llvm::MemoryBuffer::getMemBufferCopy(full_source, file).release());
  ci->getFrontendOpts().DisableFree = false;
  ci->getCodeGenOpts().DisableFree = false;

  result.context = std::make_unique<llvm::LLVMContext>();
  clang::EmitLLVMOnlyAction action(result.context.get());
  const bool ok = ci->ExecuteAction(action);
  if (ok) result.module = action.takeModule();
  log.flush();
  if (!result.module && result.log.empty()) result.log = "error: compilation failed\n";
  return result;
}

}  // namespace
}  // namespace cpu_detail

using cpu_detail::CpuKernel;
using cpu_detail::JitEngine;

namespace {

// Host memory between two inaccessible guard pages, its end flush against the upper one (up to the 64-byte
// rounding), so that a kernel that writes far past either end of a buffer faults at once instead of corrupting
// the process quietly. The slack between the lower guard page and the data, and the rounding's slack after the
// data, are red zones: filled with red_zone_byte, checked by check_red_zones, so that a small write outside the
// buffer that the pages miss is caught too. Before the data there is either no slack (element -1 is in the guard
// page) or at least 64 bytes of it.
class CpuBuffer final : public Buffer {
 public:
  explicit CpuBuffer(std::size_t bytes) : bytes_(bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t rounded = std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    const std::size_t data_pages = (rounded + page - 1) / page * page;
    mapped_ = data_pages + 2 * page;
    void* base = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
      throw Error(ErrorCode::Internal, "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    base_ = static_cast<unsigned char*>(base);
    mprotect(base_, page, PROT_NONE);
    mprotect(base_ + page + data_pages, page, PROT_NONE);
    data_ = base_ + page + data_pages - rounded;  // 64-byte aligned: pages are, and so is `rounded`
    front_ = data_pages - rounded;                // 0, or a multiple of 64 below a page
    back_ = rounded - bytes;                      // 0 to 63; 64 for an empty buffer
    pattern_.resize(front_ + back_);
    for (std::size_t i = 0; i < front_; ++i) pattern_[i] = devices::red_zone_byte(address(data_ - front_ + i));
    for (std::size_t i = 0; i < back_; ++i) pattern_[front_ + i] = devices::red_zone_byte(address(data_ + bytes_ + i));
    arm();
  }
  ~CpuBuffer() override { munmap(base_, mapped_); }
  RedZoneReport check_red_zones() override {
    RedZoneReport r;
    r.checked = true;
    if (pattern_.empty()) return r;  // no slack on either side: the guard pages alone, and memcmp is not given null
    const unsigned char* front = data_ - front_;
    const unsigned char* back = data_ + bytes_;
    if (std::memcmp(front, pattern_.data(), front_) == 0 && std::memcmp(back, pattern_.data() + front_, back_) == 0)
      return r;
    r.intact = false;
    // The damaged byte nearest the buffer: before it, the last of the front zone's that differs.
    for (std::size_t i = front_; i-- > 0;) {
      if (front[i] != pattern_[i]) {
        r.before = true;
        r.distance = front_ - i;
        r.zone_bytes = front_;
        arm();
        return r;
      }
    }
    for (std::size_t i = 0; i < back_; ++i) {
      if (back[i] != pattern_[front_ + i]) {
        r.distance = i;
        r.zone_bytes = back_;
        break;
      }
    }
    arm();
    return r;
  }
  std::size_t bytes() const override { return bytes_; }
  void* data() override { return data_; }
  void* host_address() const override { return data_; }
  void copy_from(const Buffer& source) override {
    source.download(data_, std::min(bytes_, source.bytes()));  // a memcpy when the source is a CPU buffer too
  }
  void upload(const void* host, std::size_t bytes) override {
    check(bytes, "upload");
    if (bytes) std::memcpy(data_, host, bytes);
  }
  void download(void* host, std::size_t bytes) const override {
    check(bytes, "download");
    if (bytes) std::memcpy(host, data_, bytes);
  }
  void fill(const void* pattern, std::size_t pattern_bytes) override {
    const auto* p = static_cast<const unsigned char*>(pattern);
    if (pattern_bytes == 1) {
      std::memset(data_, p[0], bytes_);
      return;
    }
    std::size_t done = std::min(pattern_bytes, bytes_);
    std::memcpy(data_, p, done);
    while (done < bytes_) {  // doubling copies: log(n) memcpy calls
      const std::size_t n = std::min(done, bytes_ - done);
      std::memcpy(data_ + done, data_, n);
      done += n;
    }
  }

 private:
  void check(std::size_t bytes, const char* what) const {
    if (bytes > bytes_)
      throw Error(ErrorCode::BadUsage, std::string("cpu buffer ") + what + ": " + std::to_string(bytes) +
                                           " bytes into a buffer of " + std::to_string(bytes_));
  }
  static std::uintptr_t address(const unsigned char* p) { return reinterpret_cast<std::uintptr_t>(p); }
  // Fills both red zones with their pattern.
  void arm() {
    if (pattern_.empty()) return;  // nothing to fill; memcpy may not be given the empty vector's null data
    std::memcpy(data_ - front_, pattern_.data(), front_);
    std::memcpy(data_ + bytes_, pattern_.data() + front_, back_);
  }
  std::size_t bytes_;
  std::size_t mapped_ = 0;
  unsigned char* base_ = nullptr;
  unsigned char* data_ = nullptr;
  std::size_t front_ = 0, back_ = 0;    // the red zones' bytes, before the data and after it
  std::vector<unsigned char> pattern_;  // what they hold: the front zone's bytes, then the back zone's
};

}  // namespace

CpuDevice::CpuDevice(std::size_t cache_capacity) : cache_(cache_capacity) {
  auto engine = JitEngine::create();
  if (!engine)
    throw Error(ErrorCode::DeviceUnavailable, "cpu: cannot start the LLVM JIT: " + llvm::toString(engine.takeError()));
  jit_ = std::move(*engine);
}

CpuDevice::~CpuDevice() {
  // Kernels still held by the host keep the engine alive through their own reference.
  cache_.clear();
}

const DeviceInfo& CpuDevice::info() {
  std::call_once(info_once_, [this] {
    info_ = describe_host_cpu(true);
    // How kernels are built and called here, for a model that must know what it may write.
    auto& p = info_.properties;
    p["compiler"] = "Clang " LLVM_VERSION_STRING " (in-process JIT)";
    p["flags"] = "-O3 -ffp-contract=on -march=" + cpu_detail::host_target().cpu + " (C " +
                 cpu_detail::language_standard(Language::c) + ", C++ " + cpu_detail::language_standard(Language::cpp) +
                 ")";
    p["isa"] = cpu_detail::notable_features();
    p["callable"] =
        "the C and C++ standard headers and Clang's intrinsic headers (<immintrin.h>) may be included; of "
        "library functions only memset, memcpy, memmove, memcmp, the malloc family and the math "
        "functions of <math.h> resolve; every kernel is given ke_bf16_to_float(__bf16) and ke_float_to_bf16(float) "
        "(Clang 16's __bf16 is a storage type: no arithmetic or casts on it)";
    p["threads"] = "1";
    struct rlimit stack {};
    if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY) {
      p["stack_bytes"] = std::to_string(stack.rlim_cur);
    }
  });
  return info_;
}

std::size_t CpuDevice::cached_modules() const { return cache_.size(); }

CompileResult CpuDevice::compile(const KernelSource& ks) {
  const auto start = cpu_detail::Clock::now();
  CompileResult result;
  if (ks.language != Language::c && ks.language != Language::cpp) {
    result.log = std::string("error: the CPU device compiles c and cpp kernels; a ") + to_string(ks.language) +
                 " kernel needs a " + (ks.language == Language::cuda ? "CUDA" : "HIP") + " device\n";
    return result;
  }
  if (!is_identifier(ks.entry)) {
    result.log = "error: the entry '" + ks.entry + "' is not a C identifier\n";
    return result;
  }
  for (const auto& [name, value] : ks.defines) {
    if (!is_identifier(name)) {
      result.log = "error: the tunable name '" + name + "' is not a C identifier\n";
      return result;
    }
  }

  for (const auto& flag : ks.flags) {
    // These change process-wide LLVM state or load code into the process.
    if (flag == "-mllvm" || flag == "-load" || flag.rfind("-plugin", 0) == 0 || flag.rfind("-fplugin", 0) == 0 ||
        flag.rfind("-fpass-plugin", 0) == 0) {
      result.log = "error: the flag '" + flag + "' is not allowed for CPU kernels\n";
      result.refused = true;
      return result;
    }
  }

  const std::string key = cpu_detail::cache_key(ks);
  if ((result.kernel = cache_.find(key))) {
    result.cached = true;
    result.compile_ms = cpu_detail::ms_since(start);
    return result;
  }

  const std::string full_source = cpu_detail::kKernelPrelude + ks.source + cpu_detail::trampoline_source(ks);
  cpu_detail::FrontendResult fe = cpu_detail::run_frontend(ks, full_source);
  result.log = std::move(fe.log);
  if (!fe.module) {
    if (result.log.find(cpu_detail::kTrampolineFile) != std::string::npos)
      result.log += "note: the CPU device calls '" + ks.entry + "' from a generated trampoline with the spec's " +
                    std::to_string(ks.params.size()) +
                    " params (buffers as pointers, sizes and scalars by value); check the entry's name and signature\n";
    result.compile_ms = cpu_detail::ms_since(start);
    return result;
  }
  const bool has_ctors = fe.module->getNamedGlobal("llvm.global_ctors") != nullptr;
  // A call the JIT would refuse to link is a broken rule, not a compile error: say which.
  for (const llvm::Function& f : *fe.module) {
    if (f.isDeclaration() && cpu_detail::is_denied_process_symbol(f.getName())) {
      result.log += "error: the kernel calls '" + f.getName().str() +
                    "', which kernels may not use (it ends or replaces the process)\n";
      result.refused = true;
    }
  }
  if (result.refused) {
    result.compile_ms = cpu_detail::ms_since(start);
    return result;
  }

  std::shared_ptr<Kernel> kernel;
  {
    std::lock_guard<std::mutex> lock(jit_->mutex);
    auto& es = jit_->jit->getExecutionSession();
    jit_->take_session_errors();
    // LLJIT's platform support (static constructors, __cxa_atexit, __dso_handle) costs about as
    // much as compiling a small kernel, so only C++ and modules with constructors get it.
    const bool with_platform = has_ctors || ks.language == Language::cpp;
    const std::string name = "ke_module_" + std::to_string(jit_->next_module++);
    auto dylib = with_platform ? jit_->jit->createJITDylib(name)
                               : llvm::Expected<llvm::orc::JITDylib&>(es.createBareJITDylib(name));
    if (!dylib) {
      result.log += "error: cannot create a JIT library: " + llvm::toString(dylib.takeError()) + "\n";
      result.compile_ms = cpu_detail::ms_since(start);
      return result;
    }
    llvm::orc::JITDylib& jd = *dylib;
    jd.addToLinkOrder(*jit_->host);
    std::string jit_error;
    llvm::orc::ThreadSafeModule tsm(std::move(fe.module), std::move(fe.context));
    if (auto err = jit_->jit->addIRModule(jd, std::move(tsm))) {
      jit_error = llvm::toString(std::move(err));
    } else {
      auto address = jit_->jit->lookup(jd, cpu_detail::kTrampolineName);
      if (!address) {
        jit_error = llvm::toString(address.takeError());
      } else {
        llvm::Error init = with_platform ? jit_->jit->initialize(jd) : llvm::Error::success();
        if (init) {
          jit_error = llvm::toString(std::move(init));
        } else {
          kernel = std::make_shared<CpuKernel>(jit_, &jd, with_platform, address->toPtr<cpu_detail::Trampoline>(),
                                               ks.params.size());
        }
      }
    }
    if (!kernel) {
      std::string session = jit_->take_session_errors();
      result.log += "error: the JIT could not load the kernel: " + jit_error + "\n";
      if (!session.empty() && session.find(jit_error) == std::string::npos) result.log += session;
      llvm::consumeError(es.removeJITDylib(jd));
      jit_->take_session_errors();
      result.compile_ms = cpu_detail::ms_since(start);
      return result;
    }
  }

  // Another thread may have compiled the same source meanwhile: the cache keeps one module.
  result.kernel = cache_.insert(key, std::move(kernel));
  result.compile_ms = cpu_detail::ms_since(start);
  return result;
}

std::unique_ptr<Buffer> CpuDevice::allocate(std::size_t bytes) { return std::make_unique<CpuBuffer>(bytes); }

void CpuDevice::flush_caches() {
  std::lock_guard<std::mutex> lock(flush_mutex_);
  if (!flush_buffer_) {
    // Larger than the last-level cache, so streaming over it evicts the kernel's data.
    const std::size_t llc = host_last_level_cache_bytes();
    flush_bytes_ = std::clamp<std::size_t>(llc ? llc + llc / 2 : 64u << 20, 8u << 20, 256u << 20);
    flush_buffer_.reset(new unsigned char[flush_bytes_]);
    std::memset(flush_buffer_.get(), 1, flush_bytes_);
  }
  volatile unsigned char* p = flush_buffer_.get();
  for (std::size_t i = 0; i < flush_bytes_; i += 64) p[i] = static_cast<unsigned char>(p[i] + 1);
}

LaunchResult CpuDevice::launch(Kernel& kernel, void** args, const LaunchDims&, bool timed, bool flush_cache) {
  LaunchResult result;
  auto* cpu_kernel = dynamic_cast<CpuKernel*>(&kernel);
  if (!cpu_kernel) {
    result.ok = false;
    result.error = "cpu: the kernel was not compiled by a CPU device";
    return result;
  }
  if (!timed) {
    cpu_kernel->run(args);
    return result;
  }
  if (flush_cache) flush_caches();
  const auto start = cpu_detail::Clock::now();
  cpu_kernel->run(args);
  const auto stop = cpu_detail::Clock::now();
  result.time_us = std::chrono::duration<double, std::micro>(stop - start).count();
  return result;
}

std::shared_ptr<Device> make_cpu_device() { return std::make_shared<CpuDevice>(); }

}  // namespace kernelevolve
