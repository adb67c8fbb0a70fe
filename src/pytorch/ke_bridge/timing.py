"""Timing a baseline as KernelEvolve's devices time a kernel (issue 50, timing parity)."""

import torch


class Timer:
    """Times one call as KernelEvolve's devices time a kernel's launches (issue 50, timing parity). On a GPU: L2
    flushed by reading a buffer twice its size (as the CUDA device does), then the GPU held on a spin until the whole
    call is queued, then events bracketing its work: the device's time with the host ahead of it, as a candidate's
    launches from C++ are timed, not a Python call's dispatch gaps. The host's own cost of the call (its Python,
    dispatch and launches, measured while the GPU is held) is kept apart as `host_us`, which a region's figure adds
    where the model pays it. On the CPU, the steady clock around the call, caches left warm: the call is its own
    host."""

    def __init__(self, device):
        self.device = device
        self.flush_buffer = None
        self.host_us = 0.0  # the last call's
        self.cycles_per_us = None
        if device.type == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush_buffer = torch.ones(max(2 * l2, 1 << 20) // 4, dtype=torch.float32, device=device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.stop = torch.cuda.Event(enable_timing=True)

    def spin_cycles_per_us(self):
        """The spin kernel's cycles per microsecond on this GPU, measured once."""
        if self.cycles_per_us is None:
            self.start.record()
            torch.cuda._sleep(1_000_000)
            self.stop.record()
            self.stop.synchronize()
            self.cycles_per_us = 1_000_000 / max(self.start.elapsed_time(self.stop) * 1000.0, 1.0)
        return self.cycles_per_us

    def time(self, fn, flush):
        import time
        if self.device.type != "cuda":
            t0 = time.perf_counter_ns()
            out = fn()
            self.host_us = (time.perf_counter_ns() - t0) / 1000.0
            return out, self.host_us
        # Held for twice the last call's host time (at least 50 us): should this call's queueing outlast the hold, the
        # GPU waited on the host inside the events, and the call is timed again with a hold long enough.
        for _ in range(3):
            hold_us = max(50.0, 2.0 * self.host_us)
            if flush:
                self.flush_buffer.sum()
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(int(hold_us * self.spin_cycles_per_us()))
            self.start.record()
            t0 = time.perf_counter_ns()
            out = fn()
            self.host_us = (time.perf_counter_ns() - t0) / 1000.0
            self.stop.record()
            self.stop.synchronize()
            if self.host_us <= hold_us or not hasattr(torch.cuda, "_sleep"):
                break
        return out, self.start.elapsed_time(self.stop) * 1000.0
