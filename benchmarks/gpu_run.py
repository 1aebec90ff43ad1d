"""The GPU run's parts under one time budget: ``python -m benchmarks.gpu_run`` (benchmarks/gpu.sh
runs it after installing what it carries).

Parts, in order, each a process of its own with a share of the budget: ``checks``
(:mod:`benchmarks.gpu_checks`), ``speed`` (:mod:`benchmarks.run`: the speed and memory table of
docs/benchmarks.md in bf16 at d=512), ``study`` (:mod:`benchmarks.gpu_study`, translation) and
``lm`` (:mod:`benchmarks.gpu_lm_study`, language models). A part's limit is
its share of the time then left, so time a part leaves unused goes to the later ones. A part past
its limit is stopped (SIGTERM, then SIGKILL) and the next one starts; every part writes its results
as it goes, so a stopped part keeps what it finished. A SIGTERM, SIGINT or SIGHUP to this process
stops the part running the same way, starts no other and ends the run (exit status 128 + the
signal's number) once the summary is written; a part also gets SIGTERM when this process dies
(Linux's parent-death signal), so no part outlives the run. Then ``summary.md`` is written from the
results: the parts' limits, times and outcomes, the checks, the speed table and the two studies'
learning curves. Output files (8, as many as the device tool brings back): summary.md, parts.json,
checks.jsonl, speed.md, speed.json, study.jsonl, lm.jsonl, run.log.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from benchmarks.table import Row, markdown
from ode_seq.studies import LANGUAGE_MODEL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTENSIONS = (
    "fairseq.data.data_utils_fast",
    "fairseq.data.token_block_utils_fast",
    "fairseq.libbleu",
    "fairseq.libbase",
    "fairseq.libnat",
    "fairseq.libnat_cuda",
)
GPU_SPEED = [
    "--device",
    "cuda",
    "--dtype",
    "bfloat16",
    "--clock",
    "wall",
    "--threads",
    "4",
    "--embed-dim",
    "512",
    "--layers",
    "6",
    "--batch-tokens",
    "8192",
    "--gen-sentences",
    "64",
    "--step-sentences",
    "64",
    "--rounds",
    "5",
    "--warmup",
    "2",
    "--sections",
    "training",
    "rk-overhead",
    "generation",
    "decoder-step",
    "compile",
]
SMOKE_SPEED = ["--smoke", "--sections", "training", "rk-overhead", "generation", "decoder-step"]
SMOKE_STUDY = ["--smoke", "--max-updates", "6"]  # a smoke run takes as long as its work, not its budget
SMOKE_SHARES = {"checks": 0.4, "speed": 0.2, "study": 0.2, "lm": 0.2}
LM_EVALUATION_SHARE = 0.15  # the LM study's test is one pass over the test blocks, no beam search
STUDY_SHARE_OF_LIMIT = 0.9  # the study ends itself within this part of its limit
STOP_GRACE_SECONDS = 10
POLL_SECONDS = 0.1  # how often a wait looks for a stop request
PROBE_SECONDS = 300  # the environment probe imports torch and fairseq
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # prctl(2)


@dataclass
class Options:
    out_dir: str
    data_bin: str
    lm_data_bin: str
    device: str
    smoke: bool


@dataclass
class Part:
    name: str
    share: float  # of the time left when it starts, against the later parts' shares
    command: Callable[[Options, float], List[str]]
    stdout: Optional[str] = None  # file of the part's standard output; else it goes to run.log


@dataclass
class Outcome:
    name: str
    limit_seconds: float
    seconds: float = 0.0
    status: str = "not started"
    command: List[str] = field(default_factory=list)


def python(*args: str) -> List[str]:
    return [sys.executable, "-m", *args]


def study_command(
    module: str, corpus: Callable[[Options], str], out: str, *extra: str
) -> Callable[[Options, float], List[str]]:
    """A round-robin study's command: ``module`` on the options' ``corpus``, ending within its
    share of the part's limit, its records in ``out``."""
    return lambda o, limit: python(
        module,
        "--device",
        o.device,
        "--precision",
        "bf16",
        "--data-bin",
        corpus(o),
        "--deadline",
        f"{time.time() + STUDY_SHARE_OF_LIMIT * limit:.0f}",
        "--out",
        os.path.join(o.out_dir, out),
        *extra,
        *(SMOKE_STUDY if o.smoke else []),
    )


PARTS = [
    Part(
        "checks",
        0.15,
        lambda o, limit: python(
            "benchmarks.gpu_checks",
            "--device",
            o.device,
            "--data-bin",
            o.data_bin,
            "--out",
            os.path.join(o.out_dir, "checks.jsonl"),
            *(["--smoke"] if o.smoke else []),
        ),
    ),
    Part(
        "speed",
        0.3,
        lambda o, limit: python(
            "benchmarks.run", *(SMOKE_SPEED if o.smoke else GPU_SPEED), "--json", os.path.join(o.out_dir, "speed.json")
        ),
        stdout="speed.md",
    ),
    Part("study", 0.3, study_command("benchmarks.gpu_study", lambda o: o.data_bin, "study.jsonl")),
    Part(
        "lm",
        0.25,
        study_command(
            "benchmarks.gpu_lm_study",
            lambda o: o.lm_data_bin,
            "lm.jsonl",
            "--evaluation-share",
            str(LM_EVALUATION_SHARE),
        ),
    ),
]


def share(part: Part, smoke: bool) -> float:
    """The part's share; with --smoke the checks get more, being as many as on the GPU but on a CPU."""
    return SMOKE_SHARES[part.name] if smoke else part.share


class StopRequest:
    """The first stop signal (SIGTERM, SIGINT, SIGHUP) this process got, if any. As a signal handler
    it only records the signal; :func:`wait` polls it, so a stop is seen wherever it lands, also
    while a part's process is being started (later stop signals change nothing)."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


def wait(process: subprocess.Popen, limit: float, stop: StopRequest) -> Optional[int]:
    """``process``'s exit status once it ends within ``limit`` seconds; None when the limit passes
    or a stop is requested first."""
    deadline = time.perf_counter() + limit
    while stop.signum is None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return None
        try:
            return process.wait(timeout=min(POLL_SECONDS, left))
        except subprocess.TimeoutExpired:
            continue
    return None


def end_with_parent(parent: int) -> Callable[[], None]:
    """What a part's process runs before it starts: it gets SIGTERM when ``parent`` dies (Linux)."""
    prctl = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(128 + signal.SIGTERM)

    return preexec


def run_process(command: List[str], limit: float, stop: StopRequest, **popen: Any) -> Optional[int]:
    """Run ``command`` in a session of its own that ends with this process, for at most ``limit``
    seconds or until ``stop`` is requested (then its group is ended: :func:`end`); its exit status,
    or None when it was ended."""
    process = subprocess.Popen(command, start_new_session=True, preexec_fn=end_with_parent(os.getpid()), **popen)
    returncode = wait(process, limit, stop)
    if returncode is None:
        end(process)
    return returncode


def run_part(part: Part, options: Options, limit: float, log, stop: StopRequest) -> Outcome:
    """Run ``part`` until it ends, ``limit`` seconds pass or ``stop`` is requested; its stderr (and
    stdout unless it has a file) go to ``log``. A part ended by a stop signal sent to it directly
    (a supervisor stopping every process of the run) counts as stopped, not failed."""
    outcome = Outcome(part.name, limit, command=part.command(options, limit))
    log.write(f"\n===== part {part.name}: limit {limit:.0f} s: {' '.join(outcome.command)}\n")
    log.flush()
    stdout = open(os.path.join(options.out_dir, part.stdout), "w") if part.stdout else log
    started = time.perf_counter()
    try:
        returncode = run_process(
            outcome.command,
            limit,
            stop,
            cwd=ROOT,
            stdout=stdout,
            stderr=log,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        if returncode is not None and -returncode in STOP_SIGNALS:  # the stop reached the part first
            outcome.status = f"stopped by {signal.Signals(-returncode).name} (partial results kept)"
        elif returncode is not None:
            outcome.status = "finished" if returncode == 0 else f"failed (exit {returncode})"
        elif stop.signum is not None:
            outcome.status = f"stopped by {stop.name} (partial results kept)"
        else:
            outcome.status = f"cut at its limit of {limit:.0f} s (partial results kept)"
    finally:
        if part.stdout:
            stdout.close()
        outcome.seconds = time.perf_counter() - started
        log.write(f"===== part {part.name}: {outcome.status} after {outcome.seconds:.0f} s\n")
        log.flush()
    return outcome


def end(process: subprocess.Popen) -> None:
    """SIGTERM to the process's group, SIGKILL if it is still there after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue


def environment(options: Options, stop: StopRequest) -> Dict[str, Any]:
    """Python, torch, the device, fairseq, and which of fairseq's compiled extensions load (a probe
    process, ended by a stop)."""
    probe = (
        "import importlib, json, torch, fairseq\n"
        "loads = {}\n"
        f"for name in {EXTENSIONS!r}:\n"
        "    try:\n"
        "        importlib.import_module(name); loads[name] = 'loads'\n"
        "    except Exception as error:\n"
        "        loads[name] = f'{type(error).__name__}: {error}'[:300]\n"
        "print(json.dumps(dict(torch=torch.__version__, cuda=torch.version.cuda,\n"
        "    device=torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu',\n"
        "    fairseq=fairseq.__version__, extensions=loads)))\n"
    )
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        returncode = run_process(
            [sys.executable, "-c", probe], PROBE_SECONDS, stop, cwd=ROOT, stdout=stdout, stderr=stderr
        )
        stdout.seek(0)
        stderr.seek(0)
        if returncode == 0:
            found = json.loads(stdout.read())
        elif returncode is None:
            found = {"probe_error": f"stopped by {stop.name}" if stop.signum else f"cut at {PROBE_SECONDS} s"}
        else:
            found = {"probe_error": stderr.read()[-2000:]}
    return dict(
        python=platform.python_version(), machine=platform.machine(), cpus=os.cpu_count(), smoke=options.smoke, **found
    )


def read_json_lines(path: str) -> List[Dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def checks_report(records: List[Dict[str, Any]]) -> List[str]:
    failed = [r for r in records if not r["passed"]]
    lines = [
        f"## Correctness: {len(records)} checks, {len(failed)} failed",
        "",
        "| group | check | precision | measured | tolerance | passed |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        if r["group"] == "decoding":
            measured = f"max Δlog p {r['error']:.2e}" + (
                f" (bf16 rounding {r['rounding']:.2e})" if "rounding" in r else ""
            )
            tolerance = f"{r['tolerance']:.2e}"
        elif r["group"] == "adaptive":
            measured = (
                f"rel. error {r['relative_error']:.2e} (fixed-grid RK4 {r['rk4_relative_error']:.2e}), "
                f"{r['evaluations']} evaluations (fp32 {r['fp32_evaluations']})"
            )
            tolerance = f"{r['tolerance']:.2e}"
        else:
            measured = r.get("error") or (
                f"{r['updates']} updates, losses {r['losses']}, {r['parameter_dtype']} on {r['device']}"
            )
            tolerance = "no error, finite losses"
        lines.append(
            f"| {r['group']} | {r['name']} | {r['dtype']} | {measured} | {tolerance} | "
            f"{'yes' if r['passed'] else 'NO'} |"
        )
    return lines


def curves(records: List[Dict[str, Any]], title: str, measure: str, value: Callable[[float], str]) -> List[str]:
    """A round-robin study's heading and its validation curves (``value`` of each validation NLL,
    at most 10 points); only a heading when it has no start record."""
    start = next((r for r in records if r["event"] == "start"), None)
    if start is None:
        return [f"## {title}", "", "No results (the part did not get as far as building its models)."]
    valid = [r for r in records if r["event"] == "valid"]
    updates = sorted({r["updates"] for r in valid})
    shown = updates if len(updates) <= 10 else [updates[i * (len(updates) - 1) // 9] for i in range(10)]
    lines = [
        f"## {title}",
        "",
        f"{start['precision']} on {start['device']}, recipe {start['recipe']}; "
        f"every configuration gets the same updates, round-robin. {measure}:",
        "",
        "| configuration | parameters | " + " | ".join(f"{u} updates" for u in shown) + " |",
        "|---|---|" + "---|" * len(shown),
    ]
    for config in start["configs"]:
        nll = {r["updates"]: r["valid_nll"] for r in valid if r["config"] == config}
        lines.append(
            f"| {config} | {start['parameters'][config]:,} | "
            + " | ".join(value(nll[u]) if u in nll else "" for u in shown)
            + " |"
        )
    return lines


def study_report(records: List[Dict[str, Any]]) -> List[str]:
    lines = curves(records, "Quality study", "Validation NLL in bits/token", lambda nll: f"{nll:.3f}")
    tests = [r for r in records if r["event"] == "test"]
    if tests:
        lines += [
            "",
            "Test set, beam 4, tokenised BLEU (SentencePiece removed, Moses tokens):",
            "",
            "| configuration | updates | BLEU | brevity penalty | sentences |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['config']} | {r['updates']} | {r['bleu']:.2f} | {r['brevity_penalty']:.3f} | {r['sentences']} |"
            for r in tests
        ]
    return lines


def lm_report(records: List[Dict[str, Any]]) -> List[str]:
    lines = curves(
        records,
        "Language-model study",
        "Validation perplexity (2^NLL over blocks of the recipe's tokens_per_sample)",
        lambda nll: f"{2**nll:.1f}",
    )
    tests = [r for r in records if r["event"] == "test"]
    if tests:
        residual = next((r["test_nll"] for r in tests if r["config"] == LANGUAGE_MODEL.baseline), None)
        lines += [
            "",
            "Test set, the same blocks (no context window); Δ against the residual model:",
            "",
            "| configuration | updates | test perplexity | NLL (bits/token) | Δ NLL vs residual |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['config']} | {r['updates']} | {2 ** r['test_nll']:.2f} | {r['test_nll']:.4f} | "
            + (f"{r['test_nll'] - residual:+.4f}" if residual is not None else "")
            + " |"
            for r in tests
        ]
    return lines


def write_summary(out_dir: str, env: Dict[str, Any], outcomes: Sequence[Outcome]) -> str:
    lines = [
        "# ode-seq GPU run",
        "",
        "Environment: " + json.dumps(env),
        "",
        "| part | limit (s) | used (s) | outcome |",
        "|---|---|---|---|",
    ]
    lines += [f"| {o.name} | {o.limit_seconds:.0f} | {o.seconds:.0f} | {o.status} |" for o in outcomes]
    lines += [""] + checks_report(read_json_lines(os.path.join(out_dir, "checks.jsonl")))
    speed = os.path.join(out_dir, "speed.md")
    lines += ["", "## Speed and memory", ""]
    rows = os.path.join(out_dir, "speed.json")
    if os.path.exists(speed) and os.path.getsize(speed):
        with open(speed, encoding="utf-8") as f:
            lines.append(f.read().rstrip())
    elif os.path.exists(rows):
        with open(rows, encoding="utf-8") as f:
            finished = json.load(f)["rows"]
        lines += [
            "The sections finished before the part was stopped:",
            "",
            markdown(
                [
                    Row(
                        r["section"],
                        r["comparison"],
                        r["metric"],
                        r["ratio"],
                        tuple(r["target"]) if r["target"] else None,
                        r["detail"],
                    )
                    for r in finished
                ]
            ),
        ]
    else:
        lines.append("No results: the part was stopped before its first section ended.")
    lines += [""] + study_report(read_json_lines(os.path.join(out_dir, "study.jsonl")))
    lines += [""] + lm_report(read_json_lines(os.path.join(out_dir, "lm.jsonl")))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--data-bin", required=True, help="the prepared translation corpus (train, valid, test)")
    parser.add_argument("--lm-data-bin", required=True, help="the prepared language-model corpus (train, valid, test)")
    parser.add_argument("--seconds", type=float, required=True, help="time budget of all parts")
    parser.add_argument("--smoke", action="store_true", help="on the CPU with tiny sizes")
    parser.add_argument("--parts", nargs="+", choices=[p.name for p in PARTS], default=[p.name for p in PARTS])
    parser.add_argument("--install", default="", help="what installing took, for the summary")
    args = parser.parse_args(argv)
    options = Options(args.out_dir, args.data_bin, args.lm_data_bin, "cpu" if args.smoke else "cuda", args.smoke)
    deadline = time.perf_counter() + args.seconds
    os.makedirs(args.out_dir, exist_ok=True)
    env: Dict[str, Any] = dict(install=args.install)
    outcomes: List[Outcome] = []
    chosen = [p for p in PARTS if p.name in args.parts]
    stop = StopRequest()
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    env.update(environment(options, stop))
    with open(os.path.join(args.out_dir, "run.log"), "a", encoding="utf-8") as log:
        for i, part in enumerate(chosen):
            if stop.signum is not None:
                break
            left = deadline - time.perf_counter()
            limit = left * share(part, args.smoke) / sum(share(p, args.smoke) for p in chosen[i:])
            outcomes.append(run_part(part, options, max(limit, 1.0), log, stop))
    with open(os.path.join(args.out_dir, "parts.json"), "w", encoding="utf-8") as f:
        json.dump(dict(environment=env, parts=[asdict(o) for o in outcomes]), f, indent=2)
    print(write_summary(args.out_dir, env, outcomes))
    if stop.signum is not None:
        return 128 + stop.signum
    return 0 if all(o.status == "finished" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
