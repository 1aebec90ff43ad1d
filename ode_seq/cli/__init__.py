"""Command-line tools, all behind one command, ``ode-seq SUBCOMMAND`` (:mod:`.main`): ``user-dir``
(:mod:`.plugin_dir`), ``average`` (checkpoint averaging), ``analyze`` (analysis report), ``export``
(a model as a plain fairseq transformer), and the metrics of :mod:`ode_seq.metrics`. Each also runs
as ``python -m ode_seq.cli.NAME``."""
