"""Side-by-side benchmarks of ode-seq's ODE Transformer and fairseq's pre-norm Transformer.

``python -m benchmarks.run`` measures every model in one process on the same batches and
prints ratios of medians over interleaved repetitions (see :mod:`benchmarks.run`).
"""
