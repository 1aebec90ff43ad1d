"""The options that make a model's parameters compute the function they compute, as a checkpoint
records them (its ``model_options``), and the checks that refuse a model built with others.

**The rule.** A model's options are those its registered fairseq model class declares (its
``add_args``: fairseq's ``transformer``/``transformer_lm`` options, ode-seq's ODE, layer-kind and
LoRA options) plus its maximum positions (a language model takes them from ``--tokens-per-sample``)
and the registered model itself (``model``: ``ode_transformer``, ``transformer_lm``, …). All of them
are the model's identity except those that change how it trains or runs but not what it computes
(:data:`NOT_THE_FUNCTION`): dropout and layer drop, quantisation noise, activation checkpointing and
FSDP wrapping, the kernel that implements the same operation, initialisation from pretrained files,
BASE layers' training shuffle, the ODE checks and the adaptive solver's evaluation cap. Values are
those the model was built with (after architecture defaults); a model may resolve its own
(:meth:`resolve_model_options`, e.g. the steps its solver takes when ``--*-ode-steps`` is unset).

**What may differ.** Nothing, when training resumes (``checkpoint_last.pt``, ``--restore-file``),
unless ``--allow-changed-options NAMES`` (an ODE model's option) names it; fine-tuning
(``--finetune-from-model``) starts a new run and may change anything (each difference is logged).
When a checkpoint is loaded, ``--model-overrides`` may change how the trained model is run
(:data:`CHANGEABLE_AT_LOAD`: the ODE solver and fairseq's layer pruning); any other difference
needs the override key ``allow_changed_options``. Averaged checkpoints must agree on all of them.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
from typing import Any, Collection, Dict, FrozenSet, List, Mapping, Optional, Tuple

from omegaconf import ListConfig

from .record import DataMismatchError

ALLOW_OPTION = "allow_changed_options"
MODEL = "model"
POSITIONS = ("max_source_positions", "max_target_positions")
NOT_THE_FUNCTION = re.compile(
    r"(.*dropout|.*layerdrop|quant_noise_.*"  # noise in training only
    r"|checkpoint_activations|offload_activations|ode_checkpoint_stages|min_params_to_wrap"  # memory
    r"|.*xformers_att_config|export"  # another implementation of the same operation
    r"|.*_embed_path|init_from_teacher"  # initial values
    r"|base_shuffle|ode_check_finite|ode_max_evaluations|" + ALLOW_OPTION + r")$"
)
CHANGEABLE_AT_LOAD = re.compile(
    r"((encoder|decoder)_ode_(method|steps)|ode_(rtol|atol|min_step)|(encoder|decoder)_layers_to_keep)$"
)
LOAD_TIME_CHANGES = "--*-ode-method, --*-ode-steps, --ode-rtol/--ode-atol/--ode-min-step and fairseq's *_layers_to_keep"
HINTS = {"max_target_positions": " (a language model's is its --tokens-per-sample)"}

Difference = Tuple[str, Any, Any]  # (option, recorded value, value of the model built now)

# Models of one layer kind each, recorded before the kind became an option: (model, --layer-kind).
KIND_MODELS = {
    "ode_transformer_nonauto": ("ode_transformer", "time-dependent"),
    "stable_ode_transformer": ("ode_transformer", "stable"),
    "ode_transformer_lm_nonauto": ("ode_transformer_lm", "time-dependent"),
    "stable_ode_transformer_lm": ("ode_transformer_lm", "stable"),
}


class OptionsMismatchError(DataMismatchError):
    """A model built with other options than those its checkpoint's parameters were trained with."""


@functools.lru_cache(maxsize=None)
def declared_options(model_class: type) -> Tuple[str, ...]:
    """The options (``args`` attributes) that ``model_class.add_args`` declares."""
    parser = argparse.ArgumentParser(add_help=False)
    model_class.add_args(parser)
    return tuple(action.dest for action in parser._actions)


def registered_name(model_class: type) -> str:
    """The name ``model_class`` is registered under with fairseq (its class name if none); fairseq
    is imported here, where a model exists, so that tools comparing records alone start without it."""
    from fairseq.models import MODEL_REGISTRY

    return next((name for name, cls in MODEL_REGISTRY.items() if cls is model_class), model_class.__name__)


def takes_allowance(model_class: type) -> bool:
    """Whether the model declares ``--allow-changed-options`` (the ODE models)."""
    return ALLOW_OPTION in declared_options(model_class)


def plain(value: Any) -> Any:
    """``value`` as a checkpoint can hold it under safe loading: str, number, bool, None or list."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple, ListConfig)):
        return [plain(item) for item in value]
    return str(value)


def class_options(model_class: type, cfg: Any) -> Dict[str, Any]:
    """The identity of a model of ``model_class`` configured by ``cfg`` (fairseq's model config),
    as configured."""
    names = [n for n in declared_options(model_class) if not NOT_THE_FUNCTION.fullmatch(n)]
    names += [name for name in POSITIONS if getattr(cfg, name, None) is not None]
    return {MODEL: registered_name(model_class), **{name: plain(getattr(cfg, name, None)) for name in names}}


def model_options(model: Any, cfg: Any) -> Dict[str, Any]:
    """The identity of ``model``, built by a task from fairseq's model config ``cfg``."""
    options = class_options(type(model), cfg)
    resolve = getattr(model, "resolve_model_options", None)
    return resolve(options) if resolve else options


def with_layer_kind(options: Mapping[str, Any]) -> Mapping[str, Any]:
    """Recorded ``options`` of a model of one layer kind (:data:`KIND_MODELS`) as the model and
    ``--layer-kind`` that are that model now; others unchanged."""
    if options.get(MODEL) not in KIND_MODELS:
        return options
    model, kind = KIND_MODELS[options[MODEL]]
    return {**options, MODEL: model, "layer_kind": kind}


def differences(recorded: Mapping[str, Any], built: Mapping[str, Any]) -> List[Difference]:
    """The options recorded for a checkpoint whose value differs in the model built now (options
    one side does not know, as of another ode-seq version, are not compared)."""
    recorded, built = with_layer_kind(recorded), with_layer_kind(built)
    return [(name, value, built[name]) for name, value in recorded.items() if name in built and built[name] != value]


def option_names(value: Any) -> FrozenSet[str]:
    """The option names of an ``--allow-changed-options`` value ("a,b", a list; flags as
    ``--decoder-ode-method`` are read as ``decoder_ode_method``)."""
    items = value.split(",") if isinstance(value, str) else (value or ())
    return frozenset(str(item).strip().lstrip("-").replace("-", "_") for item in items if str(item).strip())


def check_known(allowed: Collection[str], options: Mapping[str, Any], source: str) -> None:
    """ValueError for a name in ``allowed`` that is not one of the model's ``options``."""
    unknown = sorted(set(allowed) - set(options))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(options), n=1)
        known = f"did you mean {close[0]}?" if close else f"they are: {', '.join(sorted(options))}"
        raise ValueError(
            f"{source} names {unknown[0]}, which is not one of the options that define this model; {known}"
        )


def listed(items: List[Difference], recorded_as: str, built_as: str) -> str:
    """e.g. "decoder_ode_method is 'rk4' in the checkpoint but 'heun' in this run"."""
    return ", ".join(
        f"{name} is {old!r} {recorded_as} but {new!r} {built_as}{HINTS.get(name, '')}" for name, old, new in items
    )


def setting(name: str, value: Any) -> str:
    """The command-line spelling of option ``name`` at ``value``."""
    if name == MODEL:
        return f"an --arch of model {value}"
    flag = "--" + name.replace("_", "-")
    if value is True:
        return flag
    if value is False or value is None:
        return f"no {flag}"
    return f"{flag} {value}"


def resume_mismatch(
    path: str, recorded: Mapping[str, Any], built: Mapping[str, Any], allowed: Collection[str], allowance: bool
) -> Optional[OptionsMismatchError]:
    """The refusal to resume checkpoint ``path`` whose recorded options differ from those of the
    model built now in options ``allowed`` does not name (``allowance``: the model takes the flag)."""
    refused = [item for item in differences(recorded, built) if item[0] not in allowed]
    if not refused:
        return None
    names = ",".join(name for name, _, _ in refused)
    on_purpose = (
        f"; to change {'it' if len(refused) == 1 else 'them'} in this run on purpose (as for step adaptation), "
        f"pass --allow-changed-options {names}"
        if allowance
        else ""
    )
    return OptionsMismatchError(
        path,
        f"was trained with other model options than this run's: {listed(refused, 'in the checkpoint', 'in this run')}. "
        "Its parameters were trained to compute the checkpoint's model, so resuming would train them on as "
        "another model under the same run (nothing was trained or written). "
        f"Resume with the checkpoint's options ({', '.join(setting(name, old) for name, old, _ in refused)}); "
        "to train with the new ones, start a new run in another --save-dir (from these parameters: "
        f"--finetune-from-model {path}){on_purpose}",
    )


def changeable_at_load(overrides: Mapping[str, Any]) -> FrozenSet[str]:
    """The options ``overrides`` (fairseq's ``--model-overrides``) may change without more: the
    solver's, and a stack's layer count where its ``*_layers_to_keep`` prunes it."""
    solver = {name for name in overrides if CHANGEABLE_AT_LOAD.fullmatch(name)}
    pruned = {name.replace("_to_keep", "") for name in solver if name.endswith("_layers_to_keep")}
    return frozenset(solver | pruned | option_names(overrides.get(ALLOW_OPTION)))


def load_mismatch(
    path: str, recorded: Mapping[str, Any], built: Mapping[str, Any], overrides: Mapping[str, Any]
) -> Optional[OptionsMismatchError]:
    """The refusal to run checkpoint ``path`` as a model whose options differ from the recorded ones
    where ``overrides`` does not allow it (an option it sets outside :data:`CHANGEABLE_AT_LOAD`, or
    the checkpoint's own options changed after it was saved)."""
    check_known(option_names(overrides.get(ALLOW_OPTION)), built, f"'{ALLOW_OPTION}'")
    refused = [item for item in differences(recorded, built) if item[0] not in changeable_at_load(overrides)]
    if not refused:
        return None
    overridden = [name for name, _, _ in refused if name in overrides]
    restore = '--model-overrides "{' + ", ".join(f"'{name}': {old!r}" for name, old, _ in refused) + '}"'
    if overridden:
        cause = f"--model-overrides sets {', '.join(overridden)}"
    else:
        cause = "its saved configuration was changed after training"
        restore = f"write them back into its cfg['model'], or load it with {restore}"
    return OptionsMismatchError(
        path,
        f"was trained with other model options than it is loaded with ({cause}): "
        f"{listed(refused, 'in its record', 'as loaded')}. Its parameters were trained for the recorded "
        f"options, so it would compute a function it was never trained for. Load it with the recorded "
        f"options ({restore}); --model-overrides may change {LOAD_TIME_CHANGES} without more; to run it "
        f"with other options on purpose, add '{ALLOW_OPTION}': '{','.join(name for name, _, _ in refused)}' "
        "to --model-overrides",
    )


def fine_tuning_note(path: str, recorded: Mapping[str, Any], built: Mapping[str, Any]) -> Optional[str]:
    """The logged line for fine-tuning a checkpoint into a model with other options (None if none)."""
    changed = differences(recorded, built)
    if not changed:
        return None
    return (
        f"fine-tuning {path} into a model with other options: {listed(changed, 'in the checkpoint', 'now')} "
        "(a new run, whose parameters start from those trained for the checkpoint's options)"
    )


def options_difference(
    path: str, recorded: Mapping[str, Any], first: str, first_recorded: Mapping[str, Any]
) -> Optional[str]:
    """How the recorded options of checkpoint ``path`` differ from those of ``first`` (averaging)."""
    changed = differences(first_recorded, recorded)
    if not changed:
        return None
    items = ", ".join(f"{name} {new!r} in {path} but {old!r} in {first}" for name, old, new in changed)
    return (
        f"{path} was trained with other model options than {first}: {items}; the mean of parameters "
        "trained for different models is neither"
    )
