"""`profile-all run`'s backend options, offered from each backend's declaration
(backends.base.Option): a flag each, added to the run command's signature, and their
values handed to the API as `options={backend: {key: value}}`. A new backend with options
needs no line here or in cli.py."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from profile_all import backends


def _parameter(option: Any) -> inspect.Parameter:
    """The option as a Typer parameter: bool a flag, list a repeatable text, int, float or
    str a value."""
    wanted, info = option.types[0], {"help": option.help}
    if wanted is bool:
        hint, default = bool, False
    elif wanted in (list, tuple):
        hint, default = list[str] | None, None
    elif wanted in (int, float):
        hint, default = wanted, option.default
    else:
        hint, default = str | None, None
    if option.metavar:
        info["metavar"] = option.metavar
    return inspect.Parameter(_name(option), inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[hint, typer.Option(option.flag, **info)])


def _name(option: Any) -> str:
    return option.flag.lstrip("-").replace("-", "_")


def _offered() -> dict[str, tuple[str, Any]]:
    """Parameter name -> (backend, option), for every backend's options."""
    return {_name(option): (name, option) for name in backends.known_names()
            for option in backends.load(name).offered_options}


def offering(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` (whose `**flags` take the backends' options) with a signature that lists
    them, which Typer reads to make the command's options."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own, *(_parameter(option) for _backend, option in _offered().values())])
    return command


def options(flags: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The values the command got for the backends' flags, as `pa.run`'s `options`."""
    found: dict[str, dict[str, Any]] = {}
    for param, (backend, option) in _offered().items():
        value = flags.get(param)
        if value is not None:
            found.setdefault(backend, {})[option.key] = list(value) \
                if isinstance(value, list | tuple) else value
    return found
