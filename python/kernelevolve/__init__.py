"""KernelEvolve from Python: the kernels a run found, called on your own data.

``kernelevolve.Program`` loads a verified node of a run database through the C API (libkernelevolve) and
calls it on raw pointers; ``kernelevolve.torch`` makes it a PyTorch operator. A stored program runs in this
process with its rights, outside any sandbox: load only databases you trust, as you would a shared library.
"""
from .program import Error, Program, Param, library_path

__all__ = ["Error", "Program", "Param", "library_path"]
__version__ = "0.1.0"
