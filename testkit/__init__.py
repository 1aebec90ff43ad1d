"""What the tests, the benchmarks and the GPU run share: models built from an architecture name
(:mod:`.by_name`), the architectures that cover every model family (:mod:`.families`), fairseq's
Trainer built in this process (:mod:`.in_process`), incremental decoding against the full
forward pass (:mod:`.incremental_decoding`) and the checks of a model on a device in reduced
precision (:mod:`.device_checks`). Not shipped: ``pip install`` installs ode_seq and
user_dir only."""
