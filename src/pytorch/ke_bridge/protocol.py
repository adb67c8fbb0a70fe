"""`serve`'s line protocol: one JSON line per request from the worker that started the bridge, or from each worker
of a device that shares it, the arena held by one of them at a time."""

import json
import os
import sys
import traceback

import torch

from .arena import Arena
from .server import Server


class Client:
    """One line-protocol peer of serve: the worker that started this bridge (stdin and stdout), or, in a
    bridge the workers of a GPU share, one worker's socket. Lines are cut from what arrives, so that one
    slow or dead peer never blocks the others' requests."""

    def __init__(self, read_fd, write_fd):
        self.read_fd, self.write_fd = read_fd, write_fd
        self.pending = b""

    def read_lines(self):
        """The complete lines that arrived; None at end of input (the peer is gone)."""
        try:
            data = os.read(self.read_fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            return None
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        return lines

    def send(self, reply):
        """False when the peer is gone (a worker killed while it waited)."""
        view = memoryview((json.dumps(reply) + "\n").encode())
        try:
            while view:
                view = view[os.write(self.write_fd, view):]
        except OSError:
            return False
        return True

    def close(self):
        for fd in {self.read_fd, self.write_fd}:
            if fd > 2:
                os.close(fd)


def dtype_hint(e, server):
    """Why a cast module fails where PyTorch has no kernel for its dtype, as torch 1.13 has none in fp16 for
    most operators on the CPU."""
    if server.variant.dtype is not None and "not implemented for" in str(e):
        return (f" (this PyTorch {torch.__version__} has no {server.variant.dtype} kernel for it on "
                f"{server.device.type}: --dtype {'fp16' if server.variant.dtype == torch.float16 else 'bf16'} "
                "needs a device where it has one)")
    return ""


def serve(args):
    """Answers the worker that started it on stdin and stdout; or, with --control-fd, the workers of one
    GPU (or CPU) at once, each on a socket the host sends over that control socket with SCM_RIGHTS, until
    the host closes stdin. A shared bridge's arena holds one evaluation's blocks at a time, so it has one
    holder: "acquire" waits until the arena is free, "yield" frees it, and so does the holder's end (a
    worker killed mid-evaluation); "draw", "run" and "release" are the holder's alone."""
    import select
    import socket
    from collections import deque

    arena = Arena(args)
    server = Server(args, arena)
    greeting = {"ok": True, "torch": torch.__version__}
    if arena.ipc_handle:
        greeting["arena_ipc"] = arena.ipc_handle
    print(json.dumps(greeting), flush=True)
    shared = args.control_fd >= 0
    control = socket.socket(fileno=args.control_fd) if shared else None
    clients = {} if shared else {0: Client(0, 1)}
    holder, waiting = None, deque()

    def grant_next():
        nonlocal holder
        holder = None
        while waiting and holder is None:
            client = waiting.popleft()
            if client.read_fd in clients and client.send({"ok": True}):
                holder = client

    def drop(client):
        clients.pop(client.read_fd, None)
        if client in waiting:
            waiting.remove(client)
        if holder is client:
            grant_next()
        client.close()

    def answer(client, request):
        """The reply to `request`, or None where the reply waits (an acquire while another holds the arena)."""
        nonlocal holder
        op = request.get("op")
        if op == "acquire":
            if holder is None or holder is client:
                holder = client
                return {"ok": True}
            waiting.append(client)
            return None
        if op == "yield":
            if holder is client:
                grant_next()
            return {"ok": True}
        if shared and op in ("draw", "run", "release") and holder is not client:
            return {"ok": False, "error": f"'{op}' from a worker that does not hold the arena (acquire first)"}
        if op == "draw":
            return server.draw(request)
        if op == "run":
            return server.run(request)
        if op == "prepare":
            return server.prepare(request)
        if op == "release":
            arena.release(request.get("from", 0))
            return {"ok": True}
        return {"ok": False, "error": f"unknown request {op!r}"}

    running = True
    while running and (shared or clients):
        watched = list(clients) + ([control.fileno(), 0] if shared else [])
        ready, _, _ = select.select(watched, [], [])
        for fd in ready:
            if shared and fd == 0:  # the host: its end of input ends the bridge
                if not os.read(0, 4096):
                    running = False
                continue
            if shared and fd == control.fileno():
                try:
                    _, fds, _, _ = socket.recv_fds(control, 16, 8)
                except OSError:
                    fds = []
                for new in fds:
                    clients[new] = Client(new, new)
                continue
            client = clients.get(fd)
            if client is None:
                continue
            lines = client.read_lines()
            if lines is None:
                drop(client)
                continue
            for line in lines:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    if request.get("op") == "quit":
                        running = False
                        break
                    reply = answer(client, request)
                except Exception as e:  # the reference's own failure, told to KernelEvolve, which blames the reference
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}{dtype_hint(e, server)}",
                             "trace": traceback.format_exc()[-2000:]}
                if reply is not None and not client.send(reply):
                    drop(client)
                    break
    # Out at once, without Python's and PyTorch's teardown: while this process lives, the arena it opened
    # (the worker's GPU memory, 2 P) stays allocated after the worker has gone, and a confined worker cannot
    # wait for it. On the lent H100 a run that started right after an 8 GB one saw 16.8 GB still in use.
    sys.stdout.flush()
    os._exit(0)
