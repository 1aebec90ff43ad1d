"""ode-seq: ODE-inspired Transformers for sequence generation (library core, no fairseq training needed)."""
