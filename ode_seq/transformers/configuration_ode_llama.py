"""Configuration of a Llama whose decoder layers are ODE blocks (torch and transformers only)."""

from transformers import LlamaConfig


class ODELlamaConfig(LlamaConfig):
    """Llama's options plus how each block integrates its layer's field: ``decoder_ode_method``
    (a fixed-grid tableau name of :mod:`ode_seq.solvers.tableaus`), ``decoder_ode_steps`` N steps
    over [0, 1], ``ode_coefficients`` (the stage weights: ``fixed``, the tableau's b, or
    ``learned``, a per-token gate; :mod:`ode_seq.solvers.coefficients`). ``use_cache`` is off: the
    blocks keep no key/value cache yet."""

    model_type = "ode_llama"
    decoder_ode_method: str = "euler"
    decoder_ode_steps: int = 1
    ode_coefficients: str = "fixed"
    use_cache: bool = False
