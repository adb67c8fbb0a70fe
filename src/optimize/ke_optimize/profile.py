# The model optimizer's measurements (after cut.py): the whole model under torch.profiler, grouped by operator and
# input shape (step 1), and the regions ranked by their share of the model's time (step 3). A region's time is
# its own problem file's Model timed in this process on its own get_inputs(), all regions interleaved round by
# round (so that a slow moment of the machine falls on every region alike), the median taken; its share is its
# time times its count over the sum of all regions'. Regions whose share cannot pay are skipped, with why. Step 6's
# A/B (interleaved) times runners the same way, and states a speedup only beyond its spread (verdict).
import importlib.util
import os
import statistics
import time

import torch

from .capture import INPUTS_SEED


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn, device):
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def warm(run, device, most_s=120.0):
    """Calls `run` until its time settles: at least three calls, and until the last two each take at most twice the
    least so far (torch.compile's first calls, and the recompiles its guards cause on the second or third, done), or
    for `most_s`. Returns the last call's time. Timed rounds that began earlier held a compile, a 0.002x 'speedup'."""
    times, began = [], time.perf_counter()
    while True:
        times.append(time_once(run, device))
        least = min(times)
        if len(times) >= 3 and max(times[-2:]) <= 2 * least or time.perf_counter() - began > most_s:
            return times[-1]


def spread(times):
    ordered = sorted(times)
    return [ordered[len(ordered) // 10], ordered[(len(ordered) * 9) // 10]]


def profile_model(model, inputs, device, budget_s):
    """The model's forward time (median over calls, with the 10th and 90th percentiles), then a few calls under
    torch.profiler with record_shapes: each operator's self time per forward, by input shape."""
    with torch.no_grad():
        def call():
            model(*inputs)
        for _ in range(2):
            call()
        one = time_once(call, device)
        reps = max(3, min(100, int(budget_s / 2 / max(one, 1e-6))))
        times = [time_once(call, device) * 1e6 for _ in range(reps)]
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        calls = max(1, min(10, reps))
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(calls):
                call()
            synchronize(device)
    rows, total = operator_rows(prof.key_averages(group_by_input_shape=True), device, calls)
    time_us = statistics.median(times)
    # On a GPU, the share of the forward its kernels keep the GPU busy: well under 1, the GPU waits for the CPU's
    # launches, and a kernel that takes the GPU less time shortens the forward only as far as the launches allow.
    busy = min(1.0, total / time_us) if device.type == "cuda" and time_us > 0 else None
    return {"time_us": time_us, "spread_us": spread(times), "calls": reps,
            "profiled_calls": calls, "profiled_self_us": total, "gpu_busy": busy,
            "clock": "CUDA's, operators on the GPU" if device.type == "cuda" else "the CPU's",
            "operators": rows[:15], "operator_rows": len(rows)}


def operator_rows(events, device, calls):
    """torch.profiler's averages -> one row per operator and input shape (its self time per forward, on the GPU's
    clock on a GPU), sorted, each with its share, and their total. On a GPU the profiler lists each kernel too, as a
    row of its own on the device (`EmbeddingBag_updateOutputKernel`, no shapes), whose time is already its
    operator's: counted again, every share was about half what it is, and kernels stood among the operators."""
    rows, total = [], 0.0
    for event in events:
        if device.type == "cuda":
            if str(getattr(event, "device_type", "")).split(".")[-1] in ("CUDA", "HIP"):
                continue  # a kernel: its time is its operator's self time
            self_us = getattr(event, "self_device_time_total", None)
            if self_us is None:
                self_us = getattr(event, "self_cuda_time_total", 0.0)
        else:
            self_us = event.self_cpu_time_total
        if self_us <= 0 or event.key.startswith("ProfilerStep") or event.key.startswith("["):
            continue
        shapes = [list(s) for s in (event.input_shapes or []) if s]
        rows.append({"operator": event.key, "input_shapes": shapes, "calls": event.count // calls,
                     "self_us": self_us / calls})
        total += self_us / calls
    rows.sort(key=lambda r: -r["self_us"])
    for r in rows:
        r["share"] = r["self_us"] / total if total > 0 else 0.0
    return rows, total


def load_region(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rank(problems, directory, device, min_share, budget_s, model, model_inputs):
    """Each problem's Model, loaded from its file, timed on its own get_inputs(), interleaved with the whole model
    (so that the regions' sum is compared with the model's time measured in the same rounds); then each region's
    share and whether it is kept."""
    runners = [lambda: model(*model_inputs)]
    for p in problems:
        module = load_region(os.path.join(directory, p.file), f"kernelevolve_region_{p.hash}")
        torch.manual_seed(INPUTS_SEED)
        region = module.Model(*module.get_init_inputs()).to(device).eval()
        inputs = [x.to(device) for x in module.get_inputs()]
        runners.append(lambda region=region, inputs=inputs: region(*inputs))
    times = [[] for _ in runners]
    with torch.no_grad():
        for run in runners:
            run()
        one = sum(time_once(run, device) for run in runners)
        rounds = max(5, min(200, int(budget_s / max(one, 1e-6))))
        for r in range(rounds):
            # Each round starts at another one, so that none always follows the same.
            for k in range(len(runners)):
                i = (k + r) % len(runners)
                times[i].append(time_once(runners[i], device) * 1e6)
    total = sum(statistics.median(t) * len(p.occurrences) for t, p in zip(times[1:], problems))
    for t, p in zip(times[1:], problems):
        p.time_us = statistics.median(t)
        p.spread_us = spread(t)
        p.share = p.time_us * len(p.occurrences) / total if total > 0 else 0.0
        if not p.computes:
            p.kept, p.reason = False, "views only: nothing to compute, no kernel to write"
        elif p.share < min_share:
            p.kept, p.reason = False, (f"share {100 * p.share:.2f}% < --min-share {100 * min_share:g}%: even a kernel "
                                       f"taking no time would make the model at most {amdahl(p.share):.3f}x faster")
        elif p.share > 0.999:
            p.kept, p.reason = True, "the whole model's time"
        else:
            p.kept, p.reason = True, (f"share {100 * p.share:.1f}% >= {100 * min_share:g}%: up to "
                                      f"{amdahl(p.share):.2f}x on the model if the region took no time")
    return {"rounds": rounds, "regions_time_us": total, "model_time_us": statistics.median(times[0]),
            "method": "each region's problem file timed in this process on its own get_inputs(), interleaved round "
                      "by round with each other and the whole model; median per region; share = time x count / sum "
                      "over regions"}


def amdahl(share):
    return 1.0 / (1.0 - share) if share < 1 else float("inf")


def round_order(r, n):
    """The order of `n` runners in round `r`: each rotation of 0..n-1 in turn, every other round reversed, so that
    over 2n rounds each runner comes first and last, and before and after each other one, alike (for three, all six
    orders). A runner always after the same one (the rotations alone) could gain by it: a warm cache, a clock."""
    k = (r // 2) % n
    order = list(range(k, n)) + list(range(k))
    return order[::-1] if r % 2 else order


def interleaved(runners, device, budget_s, min_rounds=15, max_rounds=400):
    """Each runner's time, the runners interleaved in one process round by round (round_order: every order in turn,
    the rounds a whole number of its cycles), each first called until its time settles (warm), every sample as many
    calls as make about 5 ms; and each runner's ratio to the first, round by round. Returns the rounds, per runner
    the median µs a call and its samples (`times`, one a round), and for each runner after the first the median
    ratio first/runner (its speedup over the first) with its 10th and 90th percentiles over the rounds (`ratio`
    gives any other pair's)."""
    with torch.no_grad():
        one = max(warm(run, device) for run in runners)
        # Several calls a sample where one is short: a forward's steady rate, as a server calling it in a loop sees
        # it, rather than one call's latency with its GPU's tail, whose jitter on a busy host (a tenth either way on
        # the DLRM's 600 us forward) hid a 1.5x difference in the rate.
        calls = max(1, min(1000, int(5e-3 / max(one, 1e-7))))
        per_round = len(runners) * calls * one
        rounds = max(min_rounds, min(max_rounds, int(budget_s / max(per_round, 1e-7))))
        cycle = 2 * len(runners)
        rounds = -(-rounds // cycle) * cycle

        def sample(run):
            def many():
                for _ in range(calls):
                    run()
            return time_once(many, device) * 1e6 / calls

        times = [[] for _ in runners]
        for r in range(rounds):
            for i in round_order(r, len(runners)):
                times[i].append(sample(runners[i]))
    ab = {"rounds": rounds, "calls_per_sample": calls, "time_us": [statistics.median(t) for t in times],
          "times": times}
    ab["speedups"] = [ratio(ab, 0, i) for i in range(1, len(runners))]
    return ab


def ratio(ab, a, b):
    """Runner b's speedup over runner a in an interleaved A/B: a's time over b's, round by round; the median with
    its 10th and 90th percentiles."""
    r = [x / y for x, y in zip(ab["times"][a], ab["times"][b])]
    return {"median": statistics.median(r), "spread": spread(r)}


def verdict(speedup):
    """A speedup with its spread in words: reported only where the whole spread is on one side of 1."""
    low, high = speedup["spread"]
    if low > 1:
        return f"{speedup['median']:.3f}x faster (rounds {low:.3f}x to {high:.3f}x)"
    if high < 1:
        return f"{speedup['median']:.3f}x, slower (rounds {low:.3f}x to {high:.3f}x)"
    return f"no speedup beyond the spread ({speedup['median']:.3f}x, rounds {low:.3f}x to {high:.3f}x)"
