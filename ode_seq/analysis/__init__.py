"""Looking inside trained models: trajectories, weight spectra, token Lyapunov exponents.

- :mod:`.trajectories`: state and stage norms, output weights and gates of Runge–Kutta blocks;
- :mod:`.spectra` (matrices) and :mod:`.layer_weights` (fairseq layers → matrices);
- :mod:`.lyapunov` (QR method) and :mod:`.token_sensitivity` (per-token exponents of a model);
- :mod:`.solver_counts`: NFE of adaptive solvers, score against step count;
- :mod:`.plots`, :mod:`.report`; the command is ``python -m ode_seq.cli.analyze``.
"""
