"""Configuration of an M2M100 whose encoder layers are Runge–Kutta blocks (ode-seq's ODE
Transformer); shipped in an exported folder and loaded with ``trust_remote_code=True``."""
from transformers import M2M100Config


class ODEM2M100Config(M2M100Config):
    """M2M100's options plus how each encoder block integrates: ``encoder_ode_method`` (a tableau
    name of ``tableaus.py``), ``encoder_ode_steps`` N over [0, ``encoder_ode_interval``] (a
    weight-shared group's size), ``ode_coefficients`` (the stage weights' mode,
    ``coefficients.py``)."""

    model_type = "ode_m2m_100"
    encoder_ode_method: str = "euler"
    encoder_ode_steps: int = 1
    encoder_ode_interval: float = 1.0
    ode_coefficients: str = "fixed"
