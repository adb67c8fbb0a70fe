#!/usr/bin/env python3
"""Checks the programs of bench/level2_programs/ without a GPU: each one's plan against the spec that
`kernelevolve import` derives from its KernelBench problem, and its CUDA through the compilers found here.

    bench/level2_programs_check.py KB_DIR [--specs DIR] [--cli PATH] [PROGRAM.cu ...]

For each program: the kernelevolve-plan block is there once and is a JSON object; every step is a kernel the
source defines (extern "C" __global__) or a library call the device offers, with options it knows; every
argument is a param of the spec, a temporary, or an integer expression over the spec's sizes; a kernel's
declaration takes as many arguments, a pointer for each buffer and a 64-bit integer for each size or
expression; a library step's arguments come in its order (buffers, then integers, then the bias), and on each
of the spec's workloads its buffers hold what the call reads and writes (as the device checks before the
call); the temporaries' bytes; every output param is written by some step. Then each source is compiled by
nvcc -arch=sm_90 (where /usr/local/cuda*/bin/nvcc is) and by NVRTC with the options the CUDA device gives
it (where libnvrtc.so is; no driver needed). KB_DIR: a KernelBench checkout (its root or KernelBench/).
--specs DIR: specs already imported, DIR/<program name>/cuda.json; otherwise they are imported into a
temporary folder with the CLI (default build/kernelevolve; KE_PYTHON must name a Python with torch).
Exit status: the number of programs with a problem.
"""
import argparse
import ctypes
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGS = os.path.join(ROOT, "bench", "level2_programs")
MARKER = "kernelevolve-plan"
EPILOGUES = {"none", "relu", "gelu", "bias", "bias_relu", "bias_gelu"}
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "i8": 1, "u8": 1}


def problem_file(kb, name):
    level, number = name[1], int(name.split("_")[1])
    hits = sorted(glob.glob(os.path.join(kb, f"level{level}", f"{number}_*.py")))
    return hits[0] if hits else None


def plan_block(source):
    """The JSON object after the marker, by brace matching outside strings."""
    at = source.find(MARKER)
    if at < 0:
        raise ValueError("no kernelevolve-plan block")
    if source.find(MARKER, at + 1) >= 0:
        raise ValueError("the marker appears twice")
    begin = source.index("{", at)
    depth, in_str, esc = 0, False, False
    for i in range(begin, len(source)):
        ch = source[i]
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return json.loads(source[begin:i + 1])
    raise ValueError("the plan's object is not closed")


def evaluate(expr, sizes):
    """An integer expression of the spec's language (+ - * / %, cdiv, min, max) over sizes; / truncates."""
    text = str(expr)
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) - {"cdiv", "min", "max"}
    unknown = names - set(sizes)
    if unknown:
        raise ValueError(f"'{text}' names {sorted(unknown)}, which are not sizes of the spec")
    py = re.sub(r"(?<![/])/(?![/])", "//", text)
    return int(eval(py, {"__builtins__": {}}, {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max, **sizes}))


def kernel_params(source, name):
    m = re.search(r'extern\s+"C"\s+__global__\s+void\s+' + re.escape(name) + r"\s*\(([^)]*)\)", source)
    if not m:
        return None
    return [p.strip() for p in m.group(1).split(",") if p.strip()]


def check(prog, spec):
    problems, notes = [], []
    source = open(prog).read()
    try:
        plan = plan_block(source)
    except (ValueError, json.JSONDecodeError) as e:
        return [f"plan: {e}"], notes
    params = {p["name"]: p for p in spec["params"]}
    sizes_names = {p["name"] for p in spec["params"] if p["role"] in ("size", "scalar")}
    temps = {t["name"]: t for t in plan.get("temporaries", [])}
    for t in temps:
        if t in params:
            problems.append(f"temporary '{t}' is also a param's name")
    written = set()

    def arg_kind(a):
        if isinstance(a, str) and a in params and params[a]["role"] not in ("size", "scalar"):
            return "buffer"
        if isinstance(a, str) and a in temps:
            return "temporary"
        return "value"

    for w_index, w in enumerate(spec["workloads"]):
        sizes = {k: int(v) for k, v in w.items()}

        def elements(name):
            shape = params[name]["shape"] if name in params else temps[name]["shape"]
            n = 1
            for d in shape:
                n *= evaluate(d, sizes)
            return n

        temp_bytes = sum(elements(t) * DTYPE_BYTES[temps[t]["dtype"]] for t in temps)
        notes.append(f"workload {w_index}: temporaries {temp_bytes / 1e6:.1f} MB")
        for s_index, step in enumerate(plan.get("steps", [])):
            where = f"step {s_index + 1}"
            args = step.get("args", [])
            kinds = [arg_kind(a) for a in args]
            for a, k in zip(args, kinds):
                if k == "value":
                    try:
                        v = evaluate(a, sizes)
                    except Exception as e:  # noqa: BLE001 - the reason is the message
                        problems.append(f"{where}: argument {a!r}: {e}")
                        continue
                    if w_index == 0 and isinstance(a, str) and a not in sizes_names and not a.isdigit():
                        notes.append(f"{where}: {a} = {v}")
            if "library" in step:
                lib, opts = step["library"], step.get("options", {})
                if lib == "cublaslt.matmul":
                    bad = set(opts) - {"epilogue", "b_transposed"}
                    epi = opts.get("epilogue", "none")
                    if bad or epi not in EPILOGUES or opts.get("b_transposed", "false") not in ("true", "false"):
                        problems.append(f"{where}: cublaslt.matmul options {opts}")
                    need = 7 if epi.startswith("bias") else 6
                    if len(args) != need or any(k == "value" for k in kinds[:3]) or \
                            any(k != "value" for k in kinds[3:6]) or (need == 7 and kinds[6] == "value"):
                        problems.append(f"{where}: cublaslt.matmul takes A, B, D, M, N, K" +
                                        (", bias" if need == 7 else "") + f": got {args}")
                        continue
                    m, n, k = (evaluate(a, sizes) for a in args[3:6])
                    want = [("A", args[0], m * k), ("B", args[1], k * n), ("D", args[2], m * n)]
                    if need == 7:
                        want.append(("bias", args[6], n))
                    for role, buf, count in want:
                        if elements(buf) < count:
                            problems.append(f"{where}: {role} '{buf}' holds {elements(buf)} < {count} elements")
                    written.add(args[2])
                elif lib == "cudnn.conv2d":
                    bad = set(opts) - {"stride", "padding", "dilation", "groups"}
                    if bad:
                        problems.append(f"{where}: cudnn.conv2d options {sorted(bad)}")
                    if len(args) not in (10, 11) or any(k == "value" for k in kinds[:3]) or \
                            any(k != "value" for k in kinds[3:10]) or (len(args) == 11 and kinds[10] == "value"):
                        problems.append(f"{where}: cudnn.conv2d takes x, w, y, N, C, H, W, K, R, S[, bias]: got {args}")
                        continue
                    N, C, H, W, K, R, S = (evaluate(a, sizes) for a in args[3:10])
                    def pair(key, default):  # "a" or "a,b"
                        v = [int(x) for x in opts.get(key, str(default)).split(",")]
                        return v[0], v[-1]

                    sh, sw = pair("stride", 1)
                    ph, pw = pair("padding", 0)
                    dh, dw = pair("dilation", 1)
                    groups = int(opts.get("groups", "1"))
                    P = (H + 2 * ph - dh * (R - 1) - 1) // sh + 1
                    Q = (W + 2 * pw - dw * (S - 1) - 1) // sw + 1
                    want = [("x", args[0], N * C * H * W), ("w", args[1], K * (C // groups) * R * S),
                            ("y", args[2], N * K * P * Q)]
                    if len(args) == 11:
                        want.append(("bias", args[10], K))
                    for role, buf, count in want:
                        if elements(buf) < count:
                            problems.append(f"{where}: {role} '{buf}' holds {elements(buf)} < {count} elements")
                    if args[2] in params and elements(args[2]) != N * K * P * Q:
                        problems.append(f"{where}: y '{args[2]}' is {elements(args[2])} elements, the convolution "
                                        f"writes {N * K * P * Q}")
                    written.add(args[2])
                else:
                    problems.append(f"{where}: no library call '{lib}'")
            elif "kernel" in step:
                decl = kernel_params(source, step["kernel"])
                if decl is None:
                    problems.append(f"{where}: the source defines no extern \"C\" __global__ {step['kernel']}")
                    continue
                if "grid" not in step:
                    notes.append(f"{where}: no grid (the spec's launch's)")
                for key in ("grid", "block"):
                    for d in step.get(key, []):
                        try:
                            v = evaluate(d, sizes)
                            if v <= 0 or (key == "block" and v > 1024):
                                problems.append(f"{where}: {key} dimension {d} = {v}")
                        except Exception as e:  # noqa: BLE001
                            problems.append(f"{where}: {key} {d!r}: {e}")
                if len(decl) != len(args):
                    problems.append(f"{where}: {step['kernel']} declares {len(decl)} parameters, the step passes "
                                    f"{len(args)}")
                    continue
                for a, k, d in zip(args, kinds, decl):
                    pointer = "*" in d
                    if k in ("buffer", "temporary") and not pointer:
                        problems.append(f"{where}: '{a}' is a buffer, the kernel declares '{d}'")
                    if k == "value" and (pointer or not re.search(r"\blong\s+long\b|\bint64_t\b", d)):
                        problems.append(f"{where}: '{a}' is passed as a 64-bit integer, the kernel declares '{d}'")
                    if k in ("buffer", "temporary") and pointer and "const" not in d.split("*")[0]:
                        written.add(a)  # a writable pointer: counted as written (the source decides)
                    dt = params[a]["dtype"] if k == "buffer" else temps[a]["dtype"] if k == "temporary" else None
                    if dt and pointer and dt == "f32" and not re.search(r"\bfloat\b", d):
                        problems.append(f"{where}: '{a}' is f32, the kernel declares '{d}'")
            else:
                problems.append(f"{where}: neither a kernel nor a library step")
    for p in spec["params"]:
        if p["role"] in ("out", "inout") and p["name"] not in written:
            problems.append(f"output '{p['name']}' is written by no step")
    return sorted(set(problems)), notes


def compile_checks(progs):
    results = {p: [] for p in progs}
    nvcc = next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)
    for p in progs:
        if nvcc:
            r = subprocess.run([nvcc, "-arch=sm_90", "-c", p, "-o", os.devnull], capture_output=True, text=True)
            results[p].append(("nvcc", r.returncode == 0, (r.stderr or "").strip()[-800:]))
    lib = None
    for cand in sorted(glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*")):
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError:
            continue
    for p in progs:
        if not lib:
            break
        src = open(p, "rb").read()
        prog = ctypes.c_void_p()
        lib.nvrtcCreateProgram(ctypes.byref(prog), src, os.path.basename(p).encode(), 0, None, None)
        # As src/devices/cuda/cuda_device.cpp compiles a candidate.
        opts = [b"--gpu-architecture=sm_90", b"--std=c++17", b"-default-device"]
        rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(max(n.value, 1))
        lib.nvrtcGetProgramLog(prog, log)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        results[p].append(("nvrtc", rc == 0, log.value.decode(errors="replace").strip()[-800:]))
    return results, bool(nvcc), bool(lib)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kb")
    ap.add_argument("--specs")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "kernelevolve"))
    ap.add_argument("programs", nargs="*")
    a = ap.parse_intermixed_args()
    kb = a.kb if os.path.isdir(os.path.join(a.kb, "level2")) else os.path.join(a.kb, "KernelBench")
    progs = a.programs or sorted(glob.glob(os.path.join(PROGS, "*.cu")))
    specs_dir = a.specs or tempfile.mkdtemp(prefix="level2_specs.")

    def spec_of(prog):
        name = os.path.splitext(os.path.basename(prog))[0]
        path = os.path.join(specs_dir, name, "cuda.json")
        if not os.path.exists(path):
            f = problem_file(kb, name)
            if not f:
                return prog, None, f"no KernelBench file for {name} under {kb}"
            r = subprocess.run([a.cli, "import", f, "-o", os.path.join(specs_dir, name), "--device", "cpu",
                                "--language", "cuda"], capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or not os.path.exists(path):
                return prog, None, f"import failed: {r.stderr.strip()[-400:]}"
        return prog, json.load(open(path)), ""

    with ThreadPoolExecutor(max_workers=6) as pool:
        specs = list(pool.map(spec_of, progs))
    compiled, have_nvcc, have_nvrtc = compile_checks(progs)
    bad = 0
    for prog, spec, why in specs:
        name = os.path.basename(prog)
        problems, notes = check(prog, spec) if spec else ([why], [])
        for tool, ok, log in compiled[prog]:
            if not ok:
                problems.append(f"{tool}: {log}")
        tools = ", ".join(t for t, ok, _ in compiled[prog] if ok)
        status = "ok" if not problems else "PROBLEMS"
        print(f"{name}: {status} (plan vs {spec['entry'] if spec else '?'}; compiled by {tools or 'nothing'}); "
              + "; ".join(n for n in notes if n))
        for p in problems:
            print(f"   - {p}")
        bad += bool(problems)
    if not have_nvcc:
        print("note: no nvcc under /usr/local/cuda*/bin: not compiled by nvcc")
    if not have_nvrtc:
        print("note: no libnvrtc.so under /usr/local/cuda*/lib64: not compiled by NVRTC")
    print(f"{len(progs) - bad} of {len(progs)} programs pass; specs in {specs_dir}")
    sys.exit(bad)


if __name__ == "__main__":
    main()
