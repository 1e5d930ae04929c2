"""The controller's and the policies' options, read from their one declaration, validated the same way everywhere.

Controller options are the fields of `gesscale.config.ControllerConfig` (help, kind, bounds and the defaults
that differ per environment sit in each field's metadata). A policy's options are the keyword arguments of its
constructor (name, type and default from the signature) with a one-line help each in the class attribute
`option_help`. From these two sources come the CLI flags (`gesscale.cli.controller_flags`), the checks of a
scenario's `controller:` and `policy_options:` sections (`gesscale.scenario`) and the `gesscale options` table.

Values: a duration (an option of kind `duration`, or a policy option whose name ends in `_s`) is a number of
seconds or a text such as `10s`, `2m`, `1h`, `500ms`; a count is a whole number; a flag is true or false
(`true/false`, `yes/no`, `on/off`, `1/0` on the command line); `none` leaves an option that may be empty unset.
Every mistake is one `UserError` naming where it was given and the option.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from gesscale.config import ENVIRONMENTS, ControllerConfig
from gesscale.errors import UserError, brief
from gesscale.schema import parse_duration_text  # noqa: F401 - the one duration parser, re-exported

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
KINDS = ("duration", "float", "int", "bool", "choice")
# Default upper bounds of a policy's options (see `policy_options`).
POLICY_MAX_COUNT = 1_000_000
POLICY_MAX_DURATION_S = 30 * 86400.0
POLICY_MAX_NUMBER = 1e9


@dataclass(frozen=True)
class OptionSpec:
    """One option: its key (scenario, Python), kind, default, help, bounds, per-environment defaults and the
    environments it applies to; `optional` options may be left empty (`none`)."""

    name: str
    kind: str
    default: Any
    help: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    optional: bool = False
    env_defaults: Mapping[str, Any] = field(default_factory=dict)
    environments: tuple[str, ...] = tuple(ENVIRONMENTS)
    choices: tuple[str, ...] = ()  # kind `choice`: the names it takes

    @property
    def flag(self) -> str:
        """The CLI flag: the key with `_s` dropped and `_` as `-` (`control_period_s` → `--control-period`)."""
        return "--" + self.name.removesuffix("_s").replace("_", "-")

    def default_for(self, env: str) -> Any:
        """The default in an environment (`gesscale.config.ENVIRONMENTS`)."""
        return self.env_defaults.get(env, self.default)

    def show(self, value: Any) -> str:
        """A value as the table and `--help` write it (`10s` for a duration)."""
        if value is None:
            return "none"
        if self.kind == "duration":
            return f"{value:g}s"
        return str(value).lower() if isinstance(value, bool) else str(value)

    def bounds_text(self) -> str:
        """The accepted range, e.g. `>= 1`, `[0, 1]`, `paper, auto` (empty when any value goes)."""
        if self.kind == "choice":
            return ", ".join(self.choices)
        if self.lo is None and self.hi is None:
            return ""
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        if self.lo is None:
            return f"<= {self.hi:g}"
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"

    def _range_words(self) -> str:
        """`bounds_text` as it reads after "must be": `in [0, 1]`, `>= 1`."""
        text = self.bounds_text()
        return f"in {text}" if text[:1] in "[(" and text else text

    def check(self, value: Any, where: str) -> Any:
        """A value from a parsed file (YAML types), checked and converted; `UserError` naming `where`."""
        what = f"{where}: '{self.name}'"
        if value is None and self.optional:
            return None
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise UserError(f"{what} must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise UserError(f"{what} must be true or false, got {brief(value)}")
            return value
        if self.kind == "duration" and isinstance(value, str):
            value = parse_duration_text(value, what)
        if isinstance(value, bool) or not isinstance(value, int | float):
            kind = {"int": "a whole number", "duration": "a duration (10, 10s, 2m)"}.get(self.kind, "a number")
            raise UserError(f"{what} must be {kind}, got {brief(value)}")
        if isinstance(value, int) and abs(value) > 10**18:
            raise UserError(f"{what} must be {self._range_words() or 'a smaller number'}, got a "
                            f"{len(str(abs(value)))}-digit number")
        if not math.isfinite(value):
            raise UserError(f"{what} must be finite, got {value}")
        if self.kind == "int":
            if value != int(value):
                raise UserError(f"{what} must be a whole number, got {value}")
            value = int(value)
        else:
            value = float(value)
        below = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        above = self.hi is not None and value > self.hi
        if below or above:
            raise UserError(f"{what} must be {self._range_words()}, got {value:g}")
        return value

    def parse(self, text: str, where: str) -> Any:
        """A value given as text (a CLI flag or `KEY=VALUE`), converted by kind then checked as `check` does."""
        raw = str(text).strip()
        if self.optional and raw.lower() == "none":
            return None
        if self.kind == "choice":
            return self.check(raw, where)
        if self.kind == "bool":
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise UserError(f"{where}: '{self.name}' must be true or false, got {brief(raw)}")
        if self.kind == "duration":
            return self.check(parse_duration_text(raw, f"{where}: '{self.name}'"), where)
        try:
            number = float(raw)
        except ValueError:
            kind = "a whole number" if self.kind == "int" else "a number"
            raise UserError(f"{where}: '{self.name}' must be {kind}, got {brief(raw)}") from None
        return self.check(number, where)


def controller_options(env: str | None = None) -> list[OptionSpec]:
    """Every controller option (the fields of `ControllerConfig`), those of one environment when `env` is given."""
    out = []
    for f in fields(ControllerConfig):
        meta = f.metadata
        kind = meta.get("kind") or {"bool": "bool", "int": "int"}.get(str(f.type), "float")
        spec = OptionSpec(f.name, kind, f.default, meta.get("help", ""), meta.get("lo"), meta.get("hi"),
                          meta.get("lo_open", False), False, dict(meta.get("env", {})),
                          tuple(meta.get("where", ENVIRONMENTS)), tuple(meta.get("choices", ())))
        if env is None or env in spec.environments:
            out.append(spec)
    return out


def controller_option(name: str) -> OptionSpec:
    """One controller option by key."""
    for spec in controller_options():
        if spec.name == name:
            return spec
    raise KeyError(name)


def controller_from_dict(data: Any, where: str, env: str = "sim", exclude: Iterable[str] = ()) -> dict[str, Any]:
    """A `controller:` mapping checked key by key (unknown keys and bad values are a `UserError` naming `where`);
    returns the options given, converted. Options of other environments and `exclude` are refused."""
    from gesscale.schema import check_keys

    if not isinstance(data, Mapping):
        raise UserError(f"{where} must be a mapping of controller options, got {brief(data)}")
    specs = {s.name: s for s in controller_options(env) if s.name not in set(exclude)}
    check_keys(data, specs, where)
    return {k: specs[k].check(v, where) for k, v in data.items()}


def _policy_class(policy_id: str) -> type:
    from gesscale.policies.base import policy_class

    return policy_class(policy_id)


_TYPES = {"float": ("float", False), "int": ("int", False), "bool": ("bool", False),
          "float | None": ("float", True), "int | None": ("int", True), "Optional[float]": ("float", True),
          "Optional[int]": ("int", True)}


def policy_options(policy_id: str) -> list[OptionSpec]:
    """The options of one policy: the keyword arguments of its constructor that take a number or a flag
    (name, type, default from the signature; help from the class's `option_help`). Arguments of another type
    (a starting `model`) are not options: they are set by other means (`--model`)."""
    cls = _policy_class(policy_id)
    helps: dict[str, str] = {}
    bounds: dict[str, tuple[float | None, float | None, bool]] = {}
    for base in reversed(cls.__mro__):
        helps.update(getattr(base, "option_help", None) or {})
        bounds.update(getattr(base, "option_bounds", None) or {})
    out = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is p.empty:
            continue
        annotation = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if annotation not in _TYPES:
            continue
        kind, optional = _TYPES[annotation]
        if kind == "float" and p.name.endswith("_s"):
            kind = "duration"
        # Unless the class says otherwise (`option_bounds`: name -> (lo, hi, lo_open), e.g. a divisor that must
        # be > 0), counts are in [1, POLICY_MAX_COUNT], durations in [0, POLICY_MAX_DURATION_S] and other numbers
        # in [0, POLICY_MAX_NUMBER]: every option has a range.
        default_hi = {"int": POLICY_MAX_COUNT, "duration": POLICY_MAX_DURATION_S}.get(kind, POLICY_MAX_NUMBER)
        lo, hi, lo_open = bounds.get(p.name, (None, None, False) if kind == "bool" else
                                     (1.0 if kind == "int" else 0.0, default_hi, False))
        if hi is None and kind != "bool":
            hi = default_hi
        out.append(OptionSpec(p.name, kind, p.default, helps.get(p.name, ""), lo=lo, hi=hi, lo_open=lo_open,
                              optional=optional))
    return out


def policy_options_from_dict(policy_id: str, data: Any, where: str) -> dict[str, Any]:
    """One policy's options from a mapping (a scenario's `policy_options: {id: {...}}`), checked."""
    from gesscale.schema import check_keys

    if not isinstance(data, Mapping):
        raise UserError(f"{where} must be a mapping of {policy_id}'s options, got {brief(data)}")
    specs = {s.name: s for s in policy_options(policy_id)}
    if not specs and data:
        raise UserError(f"{where}: policy {policy_id!r} has no options (`gesscale options` lists them)")
    check_keys(data, specs, where)
    return {k: specs[k].check(v, where) for k, v in data.items()}


def parse_policy_option_args(args: Iterable[str], policies: list[str], flag: str = "--policy-option"
                             ) -> dict[str, dict[str, Any]]:
    """`KEY=VALUE` or `POLICY.KEY=VALUE` texts into options per policy id, checked against each policy's
    declaration. A bare KEY goes to every policy of `policies` that declares it (at least one must)."""
    out: dict[str, dict[str, Any]] = {}
    for text in args:
        key, sep, value = str(text).partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"{flag} {brief(text)}: expected KEY=VALUE or POLICY.KEY=VALUE")
        pid, dot, name = key.rpartition(".")
        if dot:
            if pid not in policies:
                raise UserError(f"{flag} {brief(text)}: policy {pid!r} is not among the policies run "
                                f"({', '.join(policies)})")
            targets = [pid]
        else:
            targets = [p for p in policies if any(s.name == name for s in policy_options(p))]
            if not targets:
                known = sorted({s.name for p in policies for s in policy_options(p)})
                raise UserError(f"{flag} {brief(text)}: no policy among {', '.join(policies)} has an option {name!r} "
                                f"(options: {', '.join(known) or 'none'}; `gesscale options` lists them)")
        for target in targets:
            specs = {s.name: s for s in policy_options(target)}
            if name not in specs:
                raise UserError(f"{flag} {brief(text)}: policy {target!r} has no option {name!r} "
                                f"(options: {', '.join(specs) or 'none'})")
            out.setdefault(target, {})[name] = specs[name].parse(value, f"{flag} {target}")
    return out


def options_rows() -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """The `gesscale options` table: (section, [(option, default, range, meaning)]) for the controller, then
    every policy that has options. A default that differs per environment is written `60s (run: 10s)`."""
    from gesscale.policies.base import policy_ids

    ctl = []
    for s in controller_options():
        default = s.show(s.default)
        differ = {ENVIRONMENTS[e]: s.show(v) for e, v in s.env_defaults.items() if v != s.default}
        if differ:
            default += " (" + "; ".join(f"{k}: {v}" for k, v in differ.items()) + ")"
        meaning = s.help
        if set(s.environments) != set(ENVIRONMENTS):
            meaning += " Only: " + ", ".join(ENVIRONMENTS[e] for e in s.environments) + "."
        ctl.append((s.name, default, s.bounds_text(), meaning))
    sections = [("controller", ctl)]
    for pid in policy_ids():
        rows = [(s.name, s.show(s.default), s.bounds_text(), s.help) for s in policy_options(pid)]
        if rows:
            sections.append((f"policy {pid}", rows))
    return sections
