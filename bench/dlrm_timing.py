"""What bench/optimize_dlrm_bound.py and bench/optimize_dlrm_calls.py both time with: a file loaded as a module, a
call's GPU time against the CPU's time to queue it, and the CPU's time per call."""
import importlib.util
import time

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def queued(fn, n=50, rounds=5):
    """(GPU us, CPU us) per call, the best of `rounds`: CUDA events around n calls, and the CPU's time to queue them.
    Where the CPU's is the larger, the calls wait on the CPU's launches."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu, cpu = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        start.record()
        for _ in range(n):
            fn()
        stop.record()
        cpu.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(stop) * 1000 / n)
    return min(gpu), min(cpu)


def per_call(fn, n=3000):
    """(CPU us per call, the same with the GPU's work drained), each the best of five loops of n calls."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best, drained = 1e9, 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best, drained = min(best, (t1 - t0) / n * 1e6), min(drained, (time.perf_counter() - t0) / n * 1e6)
    return best, drained
