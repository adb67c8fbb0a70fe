"""The model optimizer (`kernelevolve optimize`, issue 30), run by src/optimize/optimize.cpp as `python -m ke_optimize`
would run it. Its modules, in the order they build on each other: capture (the model loaded, sized up and captured as
one graph), cut (the graph partitioned into regions, each written as a problem; the winners put back), profile (the
model profiled, the regions ranked, the A/B's interleaved timing) and driver (the six steps, the report)."""
