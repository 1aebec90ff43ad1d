"""Configuration of an M2M100 whose encoder layers are Runge–Kutta blocks (ode-seq's ODE
Transformer); shipped in an exported folder and loaded with ``trust_remote_code=True``."""

from transformers import M2M100Config


class ODEM2M100Config(M2M100Config):
    """M2M100's options plus how each block of a stack integrates: ``{side}_ode_method`` (a
    tableau name of ``tableaus.py``), ``{side}_ode_steps`` N over [0, ``{side}_ode_interval``]
    (a weight-shared group's size), ``ode_coefficients`` (the stage weights' mode,
    ``coefficients.py``), ``{side}_ode_corrector`` (PCformer's corrector after each step: none,
    multistep over the first-stage values of this and ``{side}_ode_corrector_history`` earlier
    steps, or dlcl, encoders only; ``predictor_corrector.py``). A stack of Euler steps of size 1
    without a corrector is M2M100's own."""

    model_type = "ode_m2m_100"
    encoder_ode_method: str = "euler"
    encoder_ode_steps: int = 1
    encoder_ode_interval: float = 1.0
    decoder_ode_method: str = "euler"
    decoder_ode_steps: int = 1
    decoder_ode_interval: float = 1.0
    encoder_ode_corrector: str = "none"
    encoder_ode_corrector_history: int = 3
    decoder_ode_corrector: str = "none"
    decoder_ode_corrector_history: int = 3
    ode_coefficients: str = "fixed"
