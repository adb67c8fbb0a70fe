# Triton's compiler behind KernelEvolve's GPU devices: a persistent process per worker that turns a candidate's
# Python source (one @triton.jit entry) into PTX (NVIDIA) and its launch metadata. The CUDA device turns the
# PTX into a binary with the driver's own compiler, and loads and launches it like any module.
#
# Candidates are model-written code, and Triton runs a module's top level when it imports it. So this process
# never imports one itself: each request is served by a fork of it (Triton already imported and warmed up),
# which confines itself (KernelEvolve's seccomp sandbox, through libkernelevolve_confine), imports the
# candidate from memory (no file is written), compiles, hands its answer back over a pipe of its own, and
# exits. A candidate therefore cannot reach the host, forge a reply, or leave anything behind for the next
# one; one that hangs is killed at its time limit. The stage that Triton runs as a program (ptxas) is not
# run here: a confined process starts no program.
#
#   probe
#       prints {"ok": true, "triton": VERSION} when a Triton recent enough imports, else {"ok": false, "error"}.
#   serve [--confine LIBRARY] [--mode strict|basic|off]
#       prints the probe's answer (with "sandbox": what a fork gets), then answers requests, one JSON line
#       each on stdin, with one JSON line on stdout:
#       {"op": "compile", "source": TEXT, "entry": NAME, "params": [TYPE, ...] (the spec's params in order,
#        as Triton types: "*fp32", "i64", ...), "constexprs": {NAME: INT}, "num_warps": N, "num_stages": N,
#        "backend": "cuda", "arch": 90, "warp_size": 32, "timeout_s": S, "divisible": [INDEX, ...]}
#       ("divisible", optional: indices into params of integer params whose value is a multiple of 16 at every
#        launch of this compile, marked tt.divisibility=16 as Triton's launcher marks them; the caller launches
#        the result only where that holds, and a compile without it everywhere)
#       -> {"ok": true, "format": "ptx", "image": TEXT, "name": SYMBOL, "num_warps": N, "shared": BYTES,
#           "global_scratch_size": BYTES, "global_scratch_align": BYTES, "profile_scratch_size": BYTES,
#           "profile_scratch_align": BYTES, "compile_ms": MS}
#       or {"ok": false, "error": ONE LINE, "log": TRACEBACK OR COMPILER OUTPUT, "refused": BOOL}; refused
#       when the candidate made system calls the sandbox denied (named in the error).
import ctypes
import hashlib
import inspect
import json
import linecache
import os
import select
import signal
import sys
import time
import traceback
import types

MIN_VERSION = (3, 4)  # ASTSource with a name-keyed signature and constexprs, make_backend, the stage table


def version_tuple(text):
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def probe():
    try:
        import triton
    except BaseException as e:  # noqa: BLE001 - any import failure means no Triton here
        return {"ok": False, "error": f"Triton does not import: {type(e).__name__}: {e}"}
    if version_tuple(triton.__version__) < MIN_VERSION:
        need = ".".join(map(str, MIN_VERSION))
        return {"ok": False, "error": f"Triton {triton.__version__} is too old: KernelEvolve needs {need} or later"}
    return {"ok": True, "triton": triton.__version__}


def load_candidate(source, entry):
    """Runs the source as a module held in memory; inspect (and so @triton.jit) reads it from linecache."""
    import triton

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    filename = f"<candidate-{digest}>.py"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    module = types.ModuleType(f"ke_candidate_{digest}")
    module.__file__ = filename
    sys.modules[module.__name__] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - confined, in a throwaway fork
    fn = module.__dict__.get(entry)
    if fn is None:
        raise LookupError(f"the source defines no '{entry}'")
    if not isinstance(fn, triton.runtime.jit.JITFunction):
        raise TypeError(f"'{entry}' is not a @triton.jit function")
    return fn


def call_with(fn, available):
    """Calls one of Triton's internals with the arguments its signature names (they move between versions)."""
    params = inspect.signature(fn).parameters
    return fn(**{name: available[name] for name in params if name in available})


def is_int_type(triton_type):
    return triton_type[:1] in ("i", "u") and triton_type[1:].isdigit()


def signature_of(arg_names, request):
    """Triton's signature, constexprs and attributes for `request`, given the entry's argument names."""
    params = list(request["params"])
    constexprs = {name: value for name, value in request.get("constexprs", {}).items() if name in arg_names}
    runtime = [name for name in arg_names if name not in constexprs]
    if len(runtime) != len(params):
        given = ", ".join(arg_names)
        raise TypeError(f"'{request['entry']}({given})' takes {len(runtime)} argument(s) besides its tunables, "
                        f"the spec passes {len(params)}: its params in order, then tunables as tl.constexpr")
    signature = {}
    for name in arg_names:
        signature[name] = "constexpr" if name in constexprs else params[runtime.index(name)]
    # Every buffer is its own allocation (256-byte aligned): tell Triton so, as its launcher would.
    divisible = {runtime[i] for i in range(len(params)) if params[i].startswith("*")}
    # And the integers the caller vouches for (a multiple of 16 at every launch of this compile), as Triton's
    # launcher marks an int argument whose value is one: a row's stride then proves its rows 16-byte aligned.
    for index in request.get("divisible", []):
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(params):
            raise ValueError(f"'divisible' names param {index!r}, and there are {len(params)}")
        if not is_int_type(params[index]):
            raise ValueError(f"'divisible' names param {index} ({runtime[index]}: {params[index]}), not an integer")
        divisible.add(runtime[index])
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(arg_names) if name in divisible}
    return signature, constexprs, attrs


class Compiler:
    def __init__(self):
        import triton
        from triton._C.libtriton import ir
        from triton.backends.compiler import GPUTarget
        from triton.compiler import compiler as triton_compiler

        self.triton = triton
        self.ir = ir
        self.GPUTarget = GPUTarget
        self.compiler = triton_compiler

    def signature(self, fn, request):
        return signature_of(fn.arg_names, request)

    def compile(self, request):
        started = time.perf_counter()
        fn = load_candidate(request["source"], request["entry"])
        signature, constexprs, attrs = self.signature(fn, request)
        target = self.GPUTarget(request.get("backend", "cuda"), request["arch"], request.get("warp_size", 32))
        backend = self.compiler.make_backend(target)
        try:
            src = self.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        except TypeError:
            src = self.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
        options = {"num_warps": int(request.get("num_warps", 4)), "num_stages": int(request.get("num_stages", 3))}
        extra = src.parse_options() if hasattr(src, "parse_options") else {}
        options = backend.parse_options(dict(options, **extra))
        env_vars = {}
        if hasattr(self.compiler, "get_cache_invalidating_env_vars"):
            env_vars = self.compiler.get_cache_invalidating_env_vars()
        # The hash names what was compiled: the source and the integers assumed divisible by 16.
        identity = request["source"] + "\0" + json.dumps(sorted(request.get("divisible", [])))
        metadata = {"hash": hashlib.sha256(identity.encode()).hexdigest(), "target": target,
                    **options.__dict__, **env_vars}
        stages = {}
        call_with(backend.add_stages, {"stages": stages, "options": options, "language": getattr(src, "language", None)})
        context = self.ir.context()
        self.ir.load_dialects(context)
        backend.load_dialects(context)
        available = {"target": target, "options": options, "codegen_fns": backend.get_codegen_implementation(options),
                     "module_map": backend.get_module_map(), "context": context}
        module = call_with(src.make_ir, available)
        # Triton's own pipeline, in memory, up to the last stage that is not a program run on the side.
        stop = "ptx" if "ptx" in stages else list(stages)[-1]
        names = list(stages)
        for ext in names[names.index(src.ext):names.index(stop) + 1]:
            module = stages[ext](module, metadata)
        image = module if isinstance(module, str) else bytes(module).decode("latin-1")
        return {
            "ok": True,
            "format": stop,
            "image": image,
            "name": metadata["name"],
            "num_warps": metadata.get("num_warps", options.num_warps),
            "shared": metadata.get("shared", 0) or 0,
            "global_scratch_size": metadata.get("global_scratch_size", 0) or 0,
            "global_scratch_align": metadata.get("global_scratch_align", 1) or 1,
            "profile_scratch_size": metadata.get("profile_scratch_size", 0) or 0,
            "profile_scratch_align": metadata.get("profile_scratch_align", 1) or 1,
            "compile_ms": (time.perf_counter() - started) * 1000.0,
        }


WARM_UP = '''
import triton
import triton.language as tl

@triton.jit
def ke_warm_up(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
'''


class Sandbox:
    """libkernelevolve_confine: KernelEvolve's own sandbox (src/sandbox), for a process in another language."""

    def __init__(self, library, mode):
        self.mode = mode
        self.lib = None
        if library and mode != "off":
            self.lib = ctypes.CDLL(library)
            self.lib.ke_confine.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
            self.lib.ke_confine.restype = ctypes.c_int
            self.lib.ke_confine_denials.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            self.lib.ke_confine_denials.restype = ctypes.c_size_t

    def describe(self):
        if self.lib is None:
            return "off" if self.mode == "off" else "off (no confinement library given)"
        return self.mode

    def confine(self):
        if self.lib is None:
            return ""
        # Room for the compile beyond what the fork already maps (Triton's and LLVM's libraries).
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        report = ctypes.create_string_buffer(4096)
        if self.lib.ke_confine(self.mode.encode(), mapped + (8 << 30), report, len(report)) != 0:
            raise RuntimeError("the compile cannot be confined: " + report.value.decode(errors="replace"))
        return report.value.decode(errors="replace")

    def denials(self):
        if self.lib is None:
            return []
        out = ctypes.create_string_buffer(8192)
        self.lib.ke_confine_denials(out, len(out))
        return [line for line in out.value.decode(errors="replace").splitlines() if line]


def error_answer(e):
    text = str(e)
    return {"ok": False, "error": f"{type(e).__name__}: {text.splitlines()[0] if text else ''}",
            "log": traceback.format_exc()[-20000:], "refused": False}


def serve_one(compiler, sandbox, request, protocol_fds):
    """Compiles `request` in a confined fork; returns its answer."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fork: confined, and with no way to the protocol but its own pipe
        try:
            os.close(read_end)
            for fd in protocol_fds:
                os.close(fd)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            try:
                sandbox.confine()  # a fork that cannot confine itself compiles nothing
                answer = compiler.compile(request)
            except BaseException as e:  # noqa: BLE001 - a candidate's SystemExit at import is its error too
                answer = error_answer(e)
            denied = sandbox.denials()
            if denied:
                answer = {"ok": False, "refused": True,
                          "error": "the candidate made system calls the sandbox denies: " + "; ".join(denied),
                          "log": "denied: " + "\n".join(denied) + "\n" + answer.get("log", "")}
            data = json.dumps(answer).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
        finally:
            os._exit(0)
    os.close(write_end)
    timeout = float(request.get("timeout_s", 120))
    deadline = time.monotonic() + timeout
    chunks = []
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        chunk = os.read(read_end, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": False, "refused": False, "error": f"the compile did not finish within {timeout:g} s",
                "log": f"killed after {timeout:g} s (a loop at the module's top level, or a compile that does not end)"}
    try:
        answer = json.loads(b"".join(chunks))
        if isinstance(answer, dict) and "ok" in answer:
            return answer
    except ValueError:
        pass
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS:
        # A denied call made while signals are blocked (as posix_spawn, behind os.system, blocks them) cannot
        # be reported by the sandbox's handler: the kernel ends the process with SIGSYS instead.
        return {"ok": False, "refused": True,
                "error": "the candidate made a system call the sandbox denies (the confined compile was ended by "
                         "SIGSYS: a call such as starting a program, made with signals blocked)",
                "log": "the confined compile was killed by SIGSYS"}
    how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exited with status {os.WEXITSTATUS(status)}")
    return {"ok": False, "refused": False, "error": f"the compile {how} without an answer",
            "log": f"the confined compile {how} before it answered (a crash in Triton, or the candidate ended it)"}


def serve(library, mode):
    # Replies go to a private copy of stdout; anything printed goes to stderr, so it cannot garble a reply.
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(obj):
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    status = probe()
    if status["ok"]:
        try:
            sandbox = Sandbox(library, mode)
            compiler = Compiler()
            # Warm up here, unconfined and once: the libraries load, and what Triton learns by running a program
            # (ptxas --version) is cached before any fork.
            compiler.compile({"source": WARM_UP, "entry": "ke_warm_up", "params": ["*fp32", "*fp32", "i32"],
                              "constexprs": {"BLOCK": 128}, "num_warps": 4, "num_stages": 1,
                              "backend": os.environ.get("KE_TRITON_BACKEND", "cuda"),
                              "arch": int(os.environ.get("KE_TRITON_ARCH", "90")), "warp_size": 32})
            status["sandbox"] = sandbox.describe()
        except BaseException as e:  # noqa: BLE001
            status = {"ok": False, "error": f"Triton {status['triton']} imports but cannot compile: "
                                            f"{type(e).__name__}: {e}", "log": traceback.format_exc()[-20000:]}
    reply(status)
    if not status["ok"]:
        return
    protocol_fds = [0, replies.fileno()]
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if request.get("op") != "compile":
                answer = {"ok": False, "refused": False, "error": f"unknown request {request.get('op')!r}", "log": ""}
            else:
                answer = serve_one(compiler, sandbox, request, protocol_fds)
        except Exception as e:  # noqa: BLE001 - a malformed request is answered, never the end of the process
            answer = error_answer(e)
        reply(answer)


def main():
    args = sys.argv[1:]
    if args[:1] == ["probe"]:
        print(json.dumps(probe()))
        return
    if args[:1] == ["serve"]:
        library, mode = None, "strict"
        rest = args[1:]
        while rest:
            if rest[0] == "--confine" and len(rest) > 1:
                library, rest = rest[1], rest[2:]
            elif rest[0] == "--mode" and len(rest) > 1:
                mode, rest = rest[1], rest[2:]
            else:
                break
        if not rest:
            serve(library, mode)
            return
    print(json.dumps({"ok": False, "error": "usage: compile_helper.py probe | serve [--confine LIBRARY] [--mode M]"}))
    sys.exit(2)


if __name__ == "__main__":
    main()
