"""The Python side of a PyTorch problem (src/pytorch/): KernelEvolve runs this package as `python -m ke_bridge` would
(built into the library: src/core/python_package.hpp), with the interpreter that imports torch. It is trusted code
running a trusted module; candidates never run in this process.

  describe --module FILE [--device D] [--sizes JSON] [--dtype bf16|f16] [--backward [--with-forward]]
      prints the kernel signature derived from the module (docs/pytorch.md, "The signature"): on the
      meta device where it can (else by a real call on D, saying why in "derivation"), each dimension named
      after the global it follows or an expression over them, with the cost ("bytes", "flops" where
      PyTorch counts them), the module's constants, and its workloads: one per entry of the problem's
      get_workloads(), if it has one, each of which must give the same signature; else the one observed.
      Or {"error": ...} naming what could not be mapped, and exits. --dtype, --backward and --with-forward
      make another problem of the module (Variant): its floats cast, its backward.
  serve --module FILE --device D (--arena-fd N | --arena-ipc HEX) --arena-bytes B [--model-seed S] [variant]
      answers requests, one JSON line each on stdin, with one JSON line on stdout: "draw" writes the
      problem's own inputs (get_inputs() under a seed) and the module's weights into the shared arena,
      "run" runs the module on tensors viewing the arena and writes its outputs there (the reference,
      or a baseline, eager or torch.compile, timed), "prepare" says whether a mode can run here. Only
      the module named at start ever runs: a request carries offsets, dtypes, shapes, sizes, seeds and
      a mode, never code or paths.
  serve ... --control-fd N [--arena-alloc]
      the same for the workers of one device at once (a bridge the host starts): each worker's socket
      arrives over the control socket N; the arena has one holder at a time ("acquire", "yield"); on a
      GPU the bridge allocates it and its greeting carries "arena_ipc"; it ends when stdin does.

The modules, in the order they build on each other: errors and dtypes (what all share); precision (the run's TF32
policy); loading (the problem's file, its globals and workloads); module_call (the forward's names, outputs and
functional call); variant (a cast or backward problem); sparse (sparse gradients as fixed-size parts); meta (the
meta device and the kernels torch 1.13 lacks there); flops (PyTorch's FLOP counts); sampling (one call of the module
at some sizes); solver (integer expressions that fit the samples); naming (what each dimension follows); describe
(the signature, its cost and constants); arena (the memory shared with the worker, CUDA IPC on a GPU); timing (the
baselines' timer); server (the requests: draw, run, prepare); protocol (the line protocol and the shared arena's
holder); __main__ (the command line).
"""
