"""Configuration of an XGLM whose layers are Runge–Kutta blocks (ode-seq's ODE language model);
shipped in an exported folder and loaded with ``trust_remote_code=True``."""

from transformers import XGLMConfig


class ODEXGLMConfig(XGLMConfig):
    """XGLM's options plus how each block integrates: ``decoder_ode_method`` (a tableau name of
    ``tableaus.py``), ``decoder_ode_steps`` N over [0, ``decoder_ode_interval``] (a
    weight-shared group's size), ``ode_coefficients`` (the stage weights' mode,
    ``coefficients.py``), ``ode_field`` (the field form of ``fields.py``) and
    ``decoder_ode_corrector`` (PCformer's corrector after each step: none, or multistep over the
    first-stage values of this and ``decoder_ode_corrector_history`` earlier steps;
    ``predictor_corrector.py``)."""

    model_type = "ode_xglm"
    decoder_ode_method: str = "euler"
    decoder_ode_steps: int = 1
    decoder_ode_interval: float = 1.0
    ode_coefficients: str = "fixed"
    ode_field: str = "residual-branch"
    decoder_ode_corrector: str = "none"
    decoder_ode_corrector_history: int = 3
