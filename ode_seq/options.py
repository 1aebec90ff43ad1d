"""Options as dataclasses, fairseq-style: each option is one field, whose default is the option's
default and whose metadata carries its help, choices and metavar. From the dataclass derive the
command-line options (:func:`add_arguments`), the values read from fairseq's ``args``
(:func:`read_options`) and the architecture defaults (:func:`option_defaults`); the class's own
``validate`` checks the values it read.

A class's option names are ``prefix`` + field name (``--ode-field`` is field ``field`` under
prefix ``ode_``); a per-side class has a prefix with ``{side}`` (``--encoder-ode-method``), and
its help and choices may depend on the side (choices as a function of the side).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

Choices = Union[Sequence[str], Callable[[str], Sequence[str]]]
SIDES = ("encoder", "decoder")


def option(default: Any, help: str, choices: Optional[Choices] = None, metavar: Optional[str] = None) -> Any:
    """A dataclass field declaring one option."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices, "metavar": metavar})


def option_name(options_class: type, name: str, side: Optional[str] = None) -> str:
    """The ``args`` attribute of field ``name``: e.g. ``encoder_ode_method``."""
    return options_class.prefix.format(side=side) + name


def flag(options_class: type, name: str, side: Optional[str] = None) -> str:
    """The command-line spelling of field ``name``: e.g. ``--encoder-ode-method``."""
    return "--" + option_name(options_class, name, side).replace("_", "-")


def choices_of(options_class: type, name: str, side: Optional[str] = None) -> Tuple[str, ...]:
    choices = options_class.__dataclass_fields__[name].metadata["choices"]
    return tuple(choices(side) if callable(choices) else choices)


def check_choice(option_flag: str, value: Any, choices: Sequence[str]) -> None:
    """ValueError naming the option, the value and the valid values."""
    if value not in choices:
        raise ValueError(f"{option_flag} {value!r} is not valid; choose one of: {', '.join(choices)}")


def _sides(side: Optional[str]) -> Sequence[Optional[str]]:
    return SIDES if side == "both" else (side,)


def add_arguments(parser: argparse.ArgumentParser, options_class: type, side: Optional[str] = None) -> None:
    """One argparse option per field (per side with ``side="both"``), without argparse defaults,
    so architectures fill what the command line leaves unset; the help states the default."""
    types = typing.get_type_hints(options_class)
    for s in _sides(side):
        for f in dataclasses.fields(options_class):
            meta = f.metadata
            text = meta["help"].format(side=s)
            kwargs: Dict[str, Any] = {}
            if types[f.name] is bool:
                kwargs["action"] = "store_true"
            else:
                kwargs["type"] = typing.get_args(types[f.name])[0] if f.default is None else types[f.name]
                if f.default is not None:
                    text += f" (default: {f.default}, or the architecture's)"
            if meta["choices"] is not None:
                kwargs["choices"] = choices_of(options_class, f.name, s)
                kwargs["metavar"] = meta["metavar"]
            elif meta["metavar"] is not None:
                kwargs["metavar"] = meta["metavar"]
            parser.add_argument(flag(options_class, f.name, s), help=text, **kwargs)


def read_options(args: Any, options_class: type, side: Optional[str] = None, **fixed: Any) -> Any:
    """The options in ``args`` (a fairseq args/cfg object); unset ones take the field default,
    ``fixed`` ones are given."""
    values = {}
    for f in dataclasses.fields(options_class):
        value = getattr(args, option_name(options_class, f.name, side), None)
        values[f.name] = f.default if value is None else value
    return options_class(**dict(values, **fixed))


def option_defaults(options_class: type, side: Optional[str] = None) -> Dict[str, Any]:
    """{args attribute: default} for an architecture to fill."""
    return {
        option_name(options_class, f.name, s): f.default
        for s in _sides(side)
        for f in dataclasses.fields(options_class)
    }
