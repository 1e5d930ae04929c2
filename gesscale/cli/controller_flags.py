"""CLI flags generated from the one declaration of the controller's and the policies' options (`gesscale.options`).

`@controller_flags(env)` under `@app.command(...)` adds one typer option per controller option of the
environment (same flag name, type and default in every command; `gesscale options` prints them) and the
repeatable `--policy-option [POLICY.]KEY=VALUE`. The command itself declares two plain parameters instead:
`controller` (a dict of the options, checked against the declaration, converted: durations in seconds) and
`policy_option_args` (the raw `--policy-option` texts, checked once the command knows its policies, with
`gesscale.options.parse_policy_option_args`). In the `sim` environment (simulate, compare) every flag defaults
to the scenario file's value, so `controller` holds only the flags given.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import typer

from gesscale.options import OptionSpec, controller_option, controller_options

POLICY_OPTION_HELP = ("A policy option KEY=VALUE (repeat the flag); POLICY.KEY=VALUE sets it for one policy "
                      "only. `gesscale options` lists each policy's options.")
_TYPES = {"duration": str, "float": float, "int": int, "bool": bool, "choice": str}


def flag_default(spec: OptionSpec, env: str) -> Any:
    """The default a command of `env` shows for the option (None in `sim`: the scenario's value stands)."""
    if env == "sim":
        return None
    value = spec.default_for(env)
    return spec.show(value) if spec.kind == "duration" else value


def _help(spec: OptionSpec, env: str) -> str:
    if env == "sim":
        return f"{spec.help} (default: the scenario's, else {spec.show(spec.default)})"
    return spec.help


def option_for(spec: OptionSpec, env: str, aliases: tuple[str, ...] = (), help: str | None = None) -> Any:
    """The typer option of one declared controller option in an environment."""
    return typer.Option(flag_default(spec, env), spec.flag, *aliases, help=help or _help(spec, env),
                        show_default=env != "sim")


def single_flag(name: str, help: str | None = None) -> Any:
    """The typer option of one controller option with its base default and declared range, for a command that
    takes only that one (`calibrate --seed`)."""
    from gesscale.cli.ranges import number_range

    spec = controller_option(name)
    default = spec.show(spec.default) if spec.kind == "duration" else spec.default
    bounds = {}
    if spec.kind in ("int", "float") and spec.lo is not None and spec.hi is not None:
        bounds = number_range(spec.lo, spec.hi, lo_open=spec.lo_open)
    return typer.Option(default, spec.flag, help=help or spec.help, **bounds)


def controller_flags(env: str, aliases: Mapping[str, tuple[str, ...]] | None = None,
                     policy_flag: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator adding the controller options of `env` (and `--policy-option`) to a command; see the module
    docstring. `aliases` keeps former flag names working (`{"control_period_s": ("--period",)}`)."""
    specs = controller_options(env)
    aliases = dict(aliases or {})

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn)
        sig = inspect.signature(fn)
        own = [p for name, p in sig.parameters.items() if name not in ("controller", "policy_option_args")]
        clash = {p.name for p in own} & {s.name for s in specs}
        if clash:
            raise TypeError(f"{fn.__name__} declares controller options itself: {sorted(clash)}")
        params = list(own)
        annotations = {p.name: hints[p.name] for p in own if p.name in hints}
        for s in specs:
            kind = _TYPES[s.kind]
            annotation: Any = kind | None if env == "sim" else kind
            params.append(inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                            default=option_for(s, env, aliases.get(s.name, ()))))
            annotations[s.name] = annotation
        if policy_flag:
            params.append(inspect.Parameter("policy_option", inspect.Parameter.KEYWORD_ONLY, annotation=list[str],
                                            default=typer.Option([], "--policy-option", help=POLICY_OPTION_HELP)))
            annotations["policy_option"] = list[str]

        def command(**kwargs: Any) -> Any:
            controller: dict[str, Any] = {}
            for s in specs:
                value = kwargs.pop(s.name)
                if value is None:
                    continue
                controller[s.name] = s.parse(value, s.flag) if isinstance(value, str) else s.check(value, s.flag)
            extra: dict[str, Any] = {"controller": controller}
            if policy_flag:
                extra["policy_option_args"] = list(kwargs.pop("policy_option") or [])
            return fn(**kwargs, **extra)

        command.__signature__ = sig.replace(parameters=_ordered(params))  # type: ignore[attr-defined]
        command.__annotations__ = annotations
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(command, attr, getattr(fn, attr))
        command.controller_env = env  # type: ignore[attr-defined]  # read by the tests
        return command

    return decorate


def _ordered(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Keyword-only parameters after the others (a signature's rule); typer reads them all as options."""
    return [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
