// The sandbox (see include/kernelevolve/sandbox.hpp): namespaces, no new privileges, rlimits and a
// seccomp-bpf filter built with libseccomp. A denied call raises SIGSYS (SCMP_ACT_TRAP); the handler
// here records it, makes it fail with EPERM, and turns the one open the evaluator itself needs after
// setup (its timing lock, opened with O_CREAT|O_RDWR) into a read-only open of that exact path.
#include "kernelevolve/sandbox.hpp"

#include "core/threads.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <type_traits>

#ifdef KE_WITH_SECCOMP
#include <seccomp.h>
#endif

namespace kernelevolve {

const char* to_string(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::strict: return "strict";
    case SandboxMode::basic: return "basic";
    case SandboxMode::off: return "off";
  }
  return "?";
}

std::optional<SandboxMode> parse_sandbox_mode(const std::string& text) {
  if (text == "strict") return SandboxMode::strict;
  if (text == "basic") return SandboxMode::basic;
  if (text == "off") return SandboxMode::off;
  return std::nullopt;
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return std::string(name ? name : "error") + ": " + std::strerror(err);
}

}  // namespace

std::string SandboxReport::summary() const {
  std::string out = to_string(mode);
  if (!active.empty()) out += ": " + joined(active);
  if (!missing.empty()) out += "; missing: " + joined(missing);
  return out;
}

std::string SandboxReport::to_json() const {
  std::string out = "{\"mode\": " + json_string(to_string(mode)) + ", \"active\": [";
  for (std::size_t i = 0; i < active.size(); ++i) out += (i ? ", " : "") + json_string(active[i]);
  out += "], \"missing\": [";
  for (std::size_t i = 0; i < missing.size(); ++i) out += (i ? ", " : "") + json_string(missing[i]);
  return out + "]}";
}

// ---------------------------------------------------------------------------------------------------
// Namespaces

namespace {

// Outcomes of the namespace steps, shared by enter_sandbox_namespaces and the probe (which runs them in
// a forked child of a possibly multithreaded process, so it must not allocate: raw calls only).
struct NamespaceOutcome {
  int user_errno = -1;       // 0: a user namespace was entered
  int net_mount_errno = -1;  // 0: network and mount namespaces were entered
  int view_errno = -1;       // 0: the file system is read-only in this mount namespace
};

// `hide`: directories to cover with an empty read-only tmpfs (null-terminated; may be null).
NamespaceOutcome enter_namespaces_raw(const char* const* hide = nullptr, int* hidden = nullptr) {
  NamespaceOutcome o;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0) {
    o.user_errno = 0;
    o.net_mount_errno = 0;
  } else {
    o.user_errno = errno;
    // Without a user namespace, a privileged process can still leave the network and the mounts.
    o.net_mount_errno = ::unshare(CLONE_NEWNET | CLONE_NEWNS) == 0 ? 0 : errno;
  }
  if (o.net_mount_errno != 0) return o;
  // Private first, so nothing done here reaches the host's mount namespace; then every mount read-only
  // (device nodes stay usable: the kernel does not apply a mount's read-only flag to special files).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    o.view_errno = errno;
    return o;
  }
  for (int i = 0; hide && hide[i]; ++i) {
    if (::mount("none", hide[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755") == 0 &&
        hidden) {
      *hidden += 1;
    }
  }
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
  o.view_errno = ::syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &attr, sizeof attr) == 0 ? 0 : errno;
  return o;
}

void describe_namespaces(const NamespaceOutcome& o, SandboxReport& r) {
  if (o.user_errno == 0) {
    r.active.push_back("user namespace (owning no user: no file can be created)");
  } else {
    r.missing.push_back("user namespace (unshare: " + errno_text(o.user_errno) + ")");
  }
  if (o.net_mount_errno == 0) {
    r.active.push_back("network namespace (no interface up)");
  } else {
    r.missing.push_back("network and mount namespaces (unshare: " + errno_text(o.net_mount_errno) + ")");
    return;
  }
  if (o.view_errno == 0) {
    r.active.push_back("read-only mount view");
  } else {
    r.missing.push_back("read-only mount view (" + errno_text(o.view_errno) + ")");
  }
}

}  // namespace

SandboxReport enter_sandbox_namespaces(SandboxMode mode, const std::vector<std::string>& keep_visible) {
  SandboxReport r;
  r.mode = mode;
  if (mode != SandboxMode::strict) return r;
  if (const int threads = live_thread_count(); threads > 1) {
    r.missing.push_back("namespaces (the process already runs " + std::to_string(threads) +
                        " threads; they must be entered before any starts)");
    return r;
  }
  // The users' own files are hidden: nothing a compiler or a kernel needs lives there.
  std::vector<std::string> hide = {"/home", "/root"};
  if (const char* home = std::getenv("HOME");
      home && home[0] == '/' && home[1] != '\0' && home != hide[0] && home != hide[1]) {
    hide.push_back(home);
  }
  std::vector<std::string> kept;
  std::vector<const char*> hide_now;
  for (const auto& dir : hide) {
    bool needed = false;
    for (const auto& path : keep_visible) needed |= path == dir || path.rfind(dir + "/", 0) == 0;
    struct stat st {};
    if (needed) {
      kept.push_back(dir);
    } else if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      hide_now.push_back(dir.c_str());
    }
  }
  hide_now.push_back(nullptr);
  int hidden = 0;
  describe_namespaces(enter_namespaces_raw(hide_now.data(), &hidden), r);
  if (hidden > 0) {
    std::string dirs;
    for (std::size_t i = 0; i + 1 < hide_now.size(); ++i) dirs += (i ? ", " : "") + std::string(hide_now[i]);
    r.active.push_back("hidden: " + dirs);
  }
  if (!kept.empty()) r.missing.push_back("hiding " + joined(kept) + " (a path the process needs is there)");
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Denials: recorded by the SIGSYS handler (async-signal-safe: fixed slots, atomics, raw calls).

namespace {

constexpr int kDenialSlots = 8;
constexpr std::size_t kPathBytes = 112;

struct DenialSlot {
  int nr = 0;
  long args[6] = {};
  char path[kPathBytes] = {};  // the path argument, when the call has one and it could be read
};

DenialSlot g_denials[kDenialSlots];
std::atomic<int> g_denial_count{0};

// Lock files that may be reopened read-only (see SandboxAllowances::lock_files); set before the filter.
constexpr int kLockSlots = 4;
constexpr std::size_t kLockPathBytes = 512;
char g_lock_paths[kLockSlots][kLockPathBytes];
int g_lock_count = 0;
pid_t g_pid = 0;

// The argument that holds a path, for the calls a hostile kernel reaches for; -1: none.
int path_argument(long nr) {
  switch (nr) {
#ifdef SYS_open
    case SYS_open:
#endif
#ifdef SYS_creat
    case SYS_creat:
#endif
#ifdef SYS_unlink
    case SYS_unlink:
#endif
#ifdef SYS_mkdir
    case SYS_mkdir:
#endif
#ifdef SYS_rename
    case SYS_rename:
#endif
    case SYS_truncate:
    case SYS_execve: return 0;
    case SYS_openat:
    case SYS_execveat:
    case SYS_unlinkat:
    case SYS_mkdirat:
    case SYS_renameat2: return 1;
    default: return -1;
  }
}

// Copies a string from this process's memory without faulting on a bad pointer (the kernel's copy
// reports EFAULT instead). Returns the bytes read; the result is NUL-terminated when it fits.
std::size_t read_own_string(long address, char* out, std::size_t capacity) {
  out[0] = '\0';
  if (address == 0 || capacity < 2) return 0;
  iovec local{out, capacity - 1};
  iovec remote{reinterpret_cast<void*>(address), capacity - 1};
  long got = ::syscall(SYS_process_vm_readv, g_pid, &local, 1, &remote, 1, 0);
  if (got <= 0) {
    // The string may end before a page the pointer runs into: read up to the page's end.
    const long page = 4096;
    const long to_end = page - (address % page);
    if (to_end < static_cast<long>(capacity - 1)) {
      local.iov_len = remote.iov_len = static_cast<std::size_t>(to_end);
      got = ::syscall(SYS_process_vm_readv, g_pid, &local, 1, &remote, 1, 0);
    }
  }
  if (got <= 0) {
    out[0] = '\0';
    return 0;
  }
  out[got] = '\0';
  return static_cast<std::size_t>(got);
}

bool is_lock_file(const char* path) {
  for (int i = 0; i < g_lock_count; ++i) {
    if (std::strcmp(path, g_lock_paths[i]) == 0) return true;
  }
  return false;
}

#if defined(__x86_64__)
constexpr bool kTrapSupported = true;
auto& result_register(ucontext_t* uc) { return uc->uc_mcontext.gregs[REG_RAX]; }
long argument(const ucontext_t* uc, int i) {
  static constexpr int regs[6] = {REG_RDI, REG_RSI, REG_RDX, REG_R10, REG_R8, REG_R9};
  return static_cast<long>(uc->uc_mcontext.gregs[regs[i]]);
}
#elif defined(__aarch64__)
constexpr bool kTrapSupported = true;
auto& result_register(ucontext_t* uc) { return uc->uc_mcontext.regs[0]; }
long argument(const ucontext_t* uc, int i) { return static_cast<long>(uc->uc_mcontext.regs[i]); }
#else
constexpr bool kTrapSupported = false;
#endif

#if defined(__x86_64__) || defined(__aarch64__)
void on_denied_call(int, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  auto* uc = static_cast<ucontext_t*>(context);
  const long nr = info->si_syscall;
  long args[6];
  for (int i = 0; i < 6; ++i) args[i] = argument(uc, i);
  long result = -EPERM;
  char path[kLockPathBytes];
  path[0] = '\0';
  const int path_arg = path_argument(nr);
  if (path_arg >= 0) read_own_string(args[path_arg], path, sizeof path);
  const bool open_call = nr == SYS_openat
#ifdef SYS_open
                         || nr == SYS_open
#endif
      ;
  if (open_call && path[0] && is_lock_file(path)) {
    // The evaluator's timing lock: opened read-only, which flock needs no more than.
    const long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    result = fd >= 0 ? fd : -errno;
  } else {
    const int slot = g_denial_count.fetch_add(1, std::memory_order_relaxed);
    if (slot < kDenialSlots) {
      DenialSlot& d = g_denials[slot];
      d.nr = static_cast<int>(nr);
      for (int i = 0; i < 6; ++i) d.args[i] = args[i];
      std::size_t n = 0;
      for (; n + 1 < kPathBytes && path[n]; ++n) d.path[n] = path[n];
      d.path[n] = '\0';
    }
  }
  result_register(uc) = static_cast<std::remove_reference_t<decltype(result_register(uc))>>(result);
  errno = saved_errno;
}
#endif

std::string syscall_name(int nr) {
#ifdef KE_WITH_SECCOMP
  if (char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr)) {
    std::string out = name;
    std::free(name);
    return out;
  }
#endif
  return "syscall " + std::to_string(nr);
}

std::string open_flags_text(long flags) {
  std::string out;
  const int acc = static_cast<int>(flags) & O_ACCMODE;
  out = acc == O_WRONLY ? "O_WRONLY" : acc == O_RDWR ? "O_RDWR" : "O_RDONLY";
  if (flags & O_CREAT) out += "|O_CREAT";
  if (flags & O_TRUNC) out += "|O_TRUNC";
  if (flags & O_APPEND) out += "|O_APPEND";
  if (flags & 020000000) out += "|O_TMPFILE";
  return out;
}

std::string describe_denial(const DenialSlot& d) {
  const std::string name = syscall_name(d.nr);
  const std::string path = d.path[0] ? json_string(d.path) : "";
  char buf[96];
  if (d.nr == SYS_openat) return name + "(" + (path.empty() ? "?" : path) + ", " + open_flags_text(d.args[2]) + ")";
#ifdef SYS_open
  if (d.nr == SYS_open) return name + "(" + (path.empty() ? "?" : path) + ", " + open_flags_text(d.args[1]) + ")";
#endif
  if (d.nr == SYS_kill || d.nr == SYS_tkill) {
    std::snprintf(buf, sizeof buf, "(pid %ld, signal %ld)", d.args[0], d.args[1]);
    return name + buf;
  }
  if (d.nr == SYS_tgkill) {
    std::snprintf(buf, sizeof buf, "(pid %ld, thread %ld, signal %ld)", d.args[0], d.args[1], d.args[2]);
    return name + buf;
  }
  if (d.nr == SYS_socket) {
    std::snprintf(buf, sizeof buf, "(domain %ld, type %ld)", d.args[0], d.args[1]);
    return name + buf;
  }
  if (d.nr == SYS_clone) {
    std::snprintf(buf, sizeof buf, "(flags 0x%lx)", d.args[0]);
    return name + buf;
  }
  if (!path.empty()) return name + "(" + path + ")";
  return name;
}

}  // namespace

std::vector<std::string> take_sandbox_denials() {
  const int count = g_denial_count.exchange(0);
  std::vector<std::string> out;
  for (int i = 0; i < count && i < kDenialSlots; ++i) {
    const std::string line = describe_denial(g_denials[i]);
    bool seen = false;
    for (const auto& o : out) seen |= o == line;
    if (!seen) out.push_back(line);
  }
  if (count > kDenialSlots) out.push_back("and " + std::to_string(count - kDenialSlots) + " more");
  return out;
}

double sandbox_cpu_seconds_used() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// ---------------------------------------------------------------------------------------------------
// The filter

namespace {

#ifdef KE_WITH_SECCOMP

constexpr unsigned long kNamespaceCloneFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                               CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME;
constexpr unsigned long kOpenCreateFlags = O_CREAT | O_TRUNC | O_APPEND | 020000000 /* __O_TMPFILE */;

// Adds a rule by name; a call this architecture lacks is skipped. Returns false on a real error.
bool add(scmp_filter_ctx ctx, std::uint32_t action, const char* name, std::vector<scmp_arg_cmp> conditions,
         std::string& error) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return true;
  const int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(conditions.size()), conditions.data());
  if (rc != 0) {
    error = std::string("seccomp rule for ") + name + ": " + std::strerror(-rc);
    return false;
  }
  return true;
}

// The calls a confined process may make in strict mode. Everything else is denied (and recorded).
bool build_allow_list(scmp_filter_ctx ctx, const SandboxAllowances& allow, std::string& error) {
  const auto A = SCMP_ACT_ALLOW;
  // Unconditional: memory, threads' own state, time, reading, and I/O on descriptors already open.
  static const char* const always[] = {
      // reading files and descriptors already open
      "read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64", "pwritev", "pwritev2", "lseek",
      "close", "close_range", "fstat", "newfstatat", "stat", "lstat", "statx", "fstatfs", "statfs", "access",
      "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
      "umask", "dup", "dup2", "dup3", "flock", "fadvise64", "readahead", "getxattr", "lgetxattr", "fgetxattr",
      "listxattr", "llistxattr", "flistxattr",
      // waiting on descriptors; pipes and events within the process
      "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
      "epoll_pwait2", "pipe", "pipe2", "eventfd", "eventfd2",
      // the sockets it already has (the worker's channel): no new ones, no addresses
      "recvfrom", "recvmsg", "shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt",
      // memory, executable memory included (the JIT, dlopen)
      "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore", "mlock", "mlock2", "munlock",
      "membarrier", "get_mempolicy", "set_mempolicy", "mbind", "pkey_alloc", "pkey_free", "pkey_mprotect",
      // threads and their own state
      "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq", "arch_prctl",
      "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
      "sched_get_priority_min", "sched_getattr", "sched_rr_get_interval", "getcpu", "prctl", "capget",
      // time and identity (read only)
      "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres", "gettimeofday", "time", "times", "getrusage",
      "sysinfo", "uname", "getrandom", "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
      "getresuid", "getresgid", "getgroups", "getpgrp", "getpgid", "getsid", "getpriority", "getrlimit", "ioprio_get",
      // signals to itself, timers, ending
      "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend", "pause",
      "alarm", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
      "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime", "restart_syscall", "exit", "exit_group",
      "wait4", "waitid"};
  for (const char* name : always) {
    if (!add(ctx, A, name, {}, error)) return false;
  }
  // Opens that can neither create nor change a file. A GPU driver opens its device files read-write
  // after setup too: with gpu_driver, O_RDWR passes (still never creating, truncating or appending).
  const unsigned long write_mask = kOpenCreateFlags | O_WRONLY | (allow.gpu_driver ? 0 : O_RDWR);
  if (!add(ctx, A, "open", {SCMP_A1(SCMP_CMP_MASKED_EQ, write_mask, 0)}, error)) return false;
  if (!add(ctx, A, "openat", {SCMP_A2(SCMP_CMP_MASKED_EQ, write_mask, 0)}, error)) return false;
  // openat2 takes its flags in a struct the filter cannot read: ENOSYS, and libc falls back to openat.
  if (!add(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", {}, error)) return false;
  // Threads, never processes; clone3's flags are in a struct too: ENOSYS, and glibc falls back to clone.
  if (!add(ctx, A, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | kNamespaceCloneFlags, CLONE_THREAD)}, error))
    return false;
  if (!add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", {}, error)) return false;
  // Signals to itself only (abort() is a signal to itself, and a crash stays a crash).
  const auto pid = static_cast<scmp_datum_t>(g_pid);
  for (const char* name : {"kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "process_vm_readv"}) {
    if (!add(ctx, A, name, {SCMP_A0(SCMP_CMP_EQ, pid)}, error)) return false;
  }
  // Any handler but for SIGSYS, which reports the denials. The kernel reads the signal as an int, so
  // compare the whole argument: 1..30, 32..63 and 64, nothing with high bits set.
  static_assert(SIGSYS == 31, "the rules below leave out signal 31");
  if (!add(ctx, A, "rt_sigaction", {SCMP_A0(SCMP_CMP_LE, SIGSYS - 1)}, error)) return false;
  if (!add(ctx, A, "rt_sigaction", {SCMP_A0(SCMP_CMP_MASKED_EQ, ~scmp_datum_t{31}, 32)}, error)) return false;
  if (!add(ctx, A, "rt_sigaction", {SCMP_A0(SCMP_CMP_EQ, 64)}, error)) return false;
  // send() on a connected socket; an address would mean a new destination.
  if (!add(ctx, A, "sendto", {SCMP_A4(SCMP_CMP_EQ, 0)}, error)) return false;
  // Limits may be read, never raised or lowered; affinity only of the calling thread.
  if (!add(ctx, A, "prlimit64", {SCMP_A2(SCMP_CMP_EQ, 0)}, error)) return false;
  if (!add(ctx, A, "sched_setaffinity", {SCMP_A0(SCMP_CMP_EQ, 0)}, error)) return false;
  // fcntl: descriptor flags, locks, duplication; not F_SETOWN/F_SETSIG (signals to another process).
  for (int cmd : {F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK,
                  F_OFD_SETLK, F_OFD_SETLKW, F_GETPIPE_SZ, F_GET_SEALS}) {
    if (!add(ctx, A, "fcntl", {SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(cmd))}, error)) return false;
  }
  // ioctl: what isatty() and non-blocking I/O ask; a GPU driver's requests on its own descriptors.
  for (unsigned long request : {static_cast<unsigned long>(TCGETS), static_cast<unsigned long>(TIOCGWINSZ),
                                static_cast<unsigned long>(FIONREAD), static_cast<unsigned long>(FIONBIO),
                                static_cast<unsigned long>(FIOCLEX), static_cast<unsigned long>(FIONCLEX)}) {
    if (!add(ctx, A, "ioctl", {SCMP_A1(SCMP_CMP_EQ, request)}, error)) return false;
  }
  if (allow.gpu_driver) {
    if (!add(ctx, A, "ioctl", {SCMP_A0(SCMP_CMP_GE, 3)}, error)) return false;
    if (!add(ctx, A, "memfd_create", {}, error)) return false;
    for (const char* name : {"sched_setscheduler", "sched_setparam"}) {
      if (!add(ctx, A, name, {SCMP_A0(SCMP_CMP_EQ, 0)}, error)) return false;
    }
    // The CUDA driver sets its own limits after setup (seen on an H100: every kernel denied prlimit64).
    // Its own process only; the limits set before the filter have soft = hard, so nothing can be raised.
    if (!add(ctx, A, "prlimit64", {SCMP_A0(SCMP_CMP_EQ, 0)}, error)) return false;
    if (!add(ctx, A, "setrlimit", {}, error)) return false;
  }
  return true;
}

// basic: everything but the dangerous calls, which are denied (and recorded) as in strict.
bool build_deny_list(scmp_filter_ctx ctx, const SandboxAllowances& allow, std::string& error) {
  const auto D = SCMP_ACT_TRAP;
  static const char* const never[] = {
      // new programs and processes, other processes' memory
      "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_writev", "pidfd_open", "pidfd_getfd",
      "pidfd_send_signal", "tkill", "kcmp",
      // the network (and any other socket: a Unix socket can reach a privileged daemon)
      "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
      // changing the file system
      "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
      "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate",
      "ftruncate", "fallocate", "mknod", "mknodat", "utime", "utimes", "utimensat", "futimesat", "setxattr",
      "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "name_to_handle_at", "open_by_handle_at",
      "memfd_secret",
      // mounts, namespaces, identity, privileges
      "mount", "umount2", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
      "pivot_root", "chroot", "setns", "unshare", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
      "setfsuid", "setfsgid", "setgroups", "capset",
      // the machine
      "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "userfaultfd", "perf_event_open", "kexec_load",
      "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "settimeofday",
      "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm", "acct",
      "quotactl", "keyctl", "add_key", "request_key", "syslog", "vhangup", "fanotify_init", "setpriority",
      "ioprio_set"};
  for (const char* name : never) {
    if (!add(ctx, D, name, {}, error)) return false;
  }
  // Opens that could create or change a file: one rule per flag (any one set denies).
  std::vector<unsigned long> bits = {O_WRONLY, O_CREAT, O_TRUNC, O_APPEND, 020000000};
  if (!allow.gpu_driver) bits.push_back(O_RDWR);
  for (unsigned long bit : bits) {
    if (!add(ctx, D, "open", {SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)}, error)) return false;
    if (!add(ctx, D, "openat", {SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)}, error)) return false;
  }
  if (!add(ctx, SCMP_ACT_ERRNO(ENOSYS), "openat2", {}, error)) return false;
  if (!add(ctx, D, "clone", {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)}, error)) return false;
  if (!add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", {}, error)) return false;
  const auto pid = static_cast<scmp_datum_t>(g_pid);
  for (const char* name : {"kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "process_vm_readv"}) {
    if (!add(ctx, D, name, {SCMP_A0(SCMP_CMP_NE, pid)}, error)) return false;
  }
  if (!add(ctx, D, "rt_sigaction", {SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, SIGSYS)}, error)) return false;
  // Limits: never another process's; a GPU driver sets its own (see the allow-list), a CPU worker none.
  if (!add(ctx, D, "prlimit64", {SCMP_A0(SCMP_CMP_NE, 0)}, error)) return false;
  if (!allow.gpu_driver) {
    if (!add(ctx, D, "prlimit64", {SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_NE, 0)}, error)) return false;
    if (!add(ctx, D, "setrlimit", {}, error)) return false;
  }
  for (int cmd : {F_SETOWN, F_SETOWN_EX, F_SETSIG, F_SETLEASE, F_NOTIFY}) {
    if (!add(ctx, D, "fcntl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, static_cast<scmp_datum_t>(cmd))}, error))
      return false;
  }
  if (!add(ctx, D, "ioctl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI)}, error)) return false;
  if (!add(ctx, D, "sendto", {SCMP_A4(SCMP_CMP_NE, 0)}, error)) return false;
  return true;
}

#endif  // KE_WITH_SECCOMP

void set_limit(int resource, rlim_t soft, rlim_t hard, const char* name, std::vector<std::string>& done,
               SandboxReport& r) {
  rlimit current{};
  ::getrlimit(resource, &current);
  // Never raise: a limit the caller already has stays if it is tighter.
  rlimit wanted{std::min(soft, current.rlim_max), std::min(hard, current.rlim_max)};
  if (::setrlimit(resource, &wanted) == 0) {
    done.push_back(name);
  } else {
    r.missing.push_back(std::string("rlimit ") + name + " (" + errno_text(errno) + ")");
  }
}

std::string human_bytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

SandboxReport apply_sandbox(SandboxMode mode, const SandboxAllowances& allow, SandboxReport so_far) {
  SandboxReport r = std::move(so_far);
  r.mode = mode;
  if (mode == SandboxMode::off) return r;
  g_pid = ::getpid();

  // No new privileges: no setuid program, no file capability can raise this process's rights again.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
    r.active.push_back("no new privileges");
  } else {
    r.missing.push_back("no new privileges (" + errno_text(errno) + ")");
  }

  std::vector<std::string> limits;
  if (allow.limit_file_size) set_limit(RLIMIT_FSIZE, 0, 0, "file size 0", limits, r);
  set_limit(RLIMIT_CORE, 0, 0, "no core files", limits, r);
  if (allow.open_files > 0) {
    set_limit(RLIMIT_NOFILE, allow.open_files, allow.open_files,
              ("open files " + std::to_string(allow.open_files)).c_str(), limits, r);
  }
  if (allow.address_space_bytes > 0) {
    set_limit(RLIMIT_AS, allow.address_space_bytes, allow.address_space_bytes,
              ("address space " + human_bytes(allow.address_space_bytes)).c_str(), limits, r);
  }
  if (allow.cpu_seconds > 0) {
    // SIGXCPU at the soft limit, SIGKILL a few seconds later if that is caught.
    set_limit(RLIMIT_CPU, allow.cpu_seconds, allow.cpu_seconds + 5,
              ("CPU time " + std::to_string(allow.cpu_seconds) + " s").c_str(), limits, r);
  }
  if (!limits.empty()) r.active.push_back("rlimits (" + joined(limits) + ")");

  // A process that is root outside any user namespace gives up its capabilities (a CPU worker needs
  // none); a GPU driver keeps them, since which it needs after setup is not known here.
  if (!allow.gpu_driver) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &header, data) == 0 &&
        (data[0].effective | data[1].effective | data[0].permitted | data[1].permitted) != 0) {
      __user_cap_data_struct none[2]{};
      if (::syscall(SYS_capset, &header, none) == 0) {
        r.active.push_back("capabilities dropped");
      } else {
        r.missing.push_back("dropping capabilities (" + errno_text(errno) + ")");
      }
    }
  }

#ifdef KE_WITH_SECCOMP
  g_lock_count = 0;
  for (const auto& path : allow.lock_files) {
    if (path.empty()) continue;
    if (path.size() >= kLockPathBytes || g_lock_count == kLockSlots) {
      r.missing.push_back("reopening the lock file " + path + " (too long, or too many)");
      continue;
    }
    std::memcpy(g_lock_paths[g_lock_count], path.c_str(), path.size() + 1);
    ++g_lock_count;
  }
  // Denied calls raise SIGSYS, handled here; where the handler cannot emulate a return (an architecture
  // without it), they fail with EPERM unrecorded.
  std::uint32_t deny = SCMP_ACT_ERRNO(EPERM);
#if defined(__x86_64__) || defined(__aarch64__)
  if (kTrapSupported) {
    struct sigaction sa {};
    sa.sa_sigaction = on_denied_call;
    sa.sa_flags = SA_SIGINFO;  // not SA_NODEFER: a fault inside the handler kills rather than recurses
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGSYS, &sa, nullptr) == 0) {
      deny = SCMP_ACT_TRAP;
      sigset_t sys;
      sigemptyset(&sys);
      sigaddset(&sys, SIGSYS);
      ::pthread_sigmask(SIG_UNBLOCK, &sys, nullptr);
    }
  }
#endif
  std::string error;
  scmp_filter_ctx ctx = seccomp_init(mode == SandboxMode::strict ? deny : SCMP_ACT_ALLOW);
  if (!ctx) {
    error = "seccomp_init failed";
  } else {
    // A call through another ABI (int 0x80 on x86-64) is not in the allow-list's terms: kill.
    seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);     // every thread (a GPU driver's too), atomically
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);  // a binary tree over call numbers, not a list
    const bool built =
        mode == SandboxMode::strict ? build_allow_list(ctx, allow, error) : build_deny_list(ctx, allow, error);
    if (built) {
      const int rc = seccomp_load(ctx);
      if (rc != 0) error = "seccomp_load: " + errno_text(-rc);
    }
    seccomp_release(ctx);
  }
  if (error.empty()) {
    std::string what = mode == SandboxMode::strict ? "seccomp allow-list" : "seccomp deny-list";
    if (allow.gpu_driver) what += " (GPU driver: ioctl, read-write opens without create)";
    what += deny == SCMP_ACT_TRAP ? ", denials named" : ", denials fail with EPERM unnamed";
    r.active.push_back(what);
  } else {
    r.missing.push_back("seccomp (" + error + ")");
  }
#else
  (void)allow.lock_files;
  r.missing.push_back("seccomp (this build has no libseccomp: install libseccomp-dev and rebuild)");
#endif
  return r;
}

// ---------------------------------------------------------------------------------------------------
// The probe

const SandboxReport& sandbox_support() {
  static const SandboxReport report = [] {
    SandboxReport r;
    r.mode = SandboxMode::strict;
    // In a child: the namespace steps and the filter's prerequisites, so this process is left as it is.
    // Only raw calls after fork (the parent may have threads); the outcome comes back through a pipe.
    struct Probe {
      NamespaceOutcome namespaces;
      int trap_errno = -1;
    } probe;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      r.missing.push_back("the probe could not run (pipe: " + errno_text(errno) + ")");
      return r;
    }
    const pid_t child = ::fork();
    if (child == 0) {
      Probe p;
      p.namespaces = enter_namespaces_raw();
      std::uint32_t action = SECCOMP_RET_TRAP;
      p.trap_errno = ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0 ? 0 : errno;
      (void)!::write(fds[1], &p, sizeof p);
      ::_exit(0);
    }
    ::close(fds[1]);
    const bool got = child > 0 && ::read(fds[0], &probe, sizeof probe) == static_cast<ssize_t>(sizeof probe);
    ::close(fds[0]);
    if (child > 0) {
      int status = 0;
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
    }
    if (!got) {
      r.missing.push_back("the probe could not run");
      return r;
    }
    const NamespaceOutcome& o = probe.namespaces;
    describe_namespaces(o, r);
#ifdef KE_WITH_SECCOMP
    if (probe.trap_errno != 0) {
      r.missing.push_back("seccomp (SECCOMP_GET_ACTION_AVAIL: " + errno_text(probe.trap_errno) + ")");
    } else {
      r.active.push_back(std::string("seccomp allow-list (libseccomp ") + std::to_string(seccomp_version()->major) +
                         "." + std::to_string(seccomp_version()->minor) + ")" +
                         (kTrapSupported ? ", denials named" : ", denials fail with EPERM unnamed"));
    }
#else
    r.missing.push_back("seccomp (this build has no libseccomp)");
#endif
    r.active.push_back("no new privileges");
    r.active.push_back("rlimits");
    return r;
  }();
  return report;
}

}  // namespace kernelevolve
