"""Command-line tools: ``python -m ode_seq.cli.average`` (checkpoint averaging),
``python -m ode_seq.cli.analyze`` (analysis report), ``python -m ode_seq.cli.export``
(a non-autonomous model as a plain fairseq transformer)."""
