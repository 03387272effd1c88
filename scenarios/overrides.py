"""``--set key=value``: change one key of a scenario from the command line.

An override is a dotted key path into the scenario's TOML (``hall.ultraservers=32``,
``site.climate=hot``, ``services[0].replicas=8``) and a value written as a TOML value
(``32``, ``0.5``, ``true``, ``"hot"``, ``[4, 16]``); a bare word that is not TOML is taken as a
string (``site.climate=hot``). An empty value unsets the key (``hall.ultraservers=``: the
scenario's value removed, so its default or another key such as ``hall.it_envelope_w`` decides). Overrides are applied to the raw TOML data before validation, so the
scenario's own checks judge the result (an unknown key is refused like one in a file, with the
``--set`` argument named). In a comparison scenario an override applies to the base and wins over a
variant's own value.

The effective scenario (overrides applied) is what a run records: the original text with the values
replaced in place (comments kept) plus a comment naming the overrides, and it re-parses to exactly
the validated data, so ``twin rerun`` reproduces the run.
"""

from __future__ import annotations

import copy
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import spec
from scenarios.spec import Scenario, ScenarioError
from storage.kpis import OVERRIDE_LINE, OVERRIDES_HEAD

MAX_SET_LEN = 4096
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()  # ``KEY=``: remove the key
MAX_DEPTH = 8
# Arrays and inline tables in a value: a scenario key holds at most a list of tables of lists
# (``[[4, 16]]``); deeper is a mistake, and far deeper exhausts the TOML parser's recursion.
MAX_VALUE_DEPTH = 16
_SEGMENT = re.compile(r"^([A-Za-z0-9_-]+)((?:\[\d{1,6}\])*)$")
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Override:
    """One ``--set``: the key path (table keys and list indices), its value and what the user typed."""

    key: str
    path: tuple[str | int, ...]
    value: Any
    arg: str

    def __str__(self) -> str:
        return f"--set {self.arg}"


def _control_char(text: str) -> str | None:
    """The first control character of ``text`` (tab aside), as ``U+XXXX``, or ``None``. A value is
    one line of printable text: a newline, carriage return or other control character would break
    the comment naming the override in the recorded scenario."""
    for ch in text:
        if ch != "\t" and unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def _nesting(text: str) -> int:
    """The deepest nesting of brackets and braces in ``text`` outside quoted strings."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_value(text: str) -> Any:
    """A TOML value (``32``, ``1e3``, ``true``, ``"x"``, ``[1, 2]``, ``{ min = 1 }``); a bare word
    that is not TOML is a string. Raises ``ValueError`` for a control character (a newline: a
    value is one line), nesting deeper than ``MAX_VALUE_DEPTH`` and malformed TOML that is clearly
    meant as such (quotes, brackets, braces)."""
    s = text.strip()
    bad = _control_char(s)
    if bad is not None:
        raise ValueError(f"the value contains the control character {bad}; a value is one line of text")
    if _nesting(s) > MAX_VALUE_DEPTH:
        raise ValueError(f"arrays or tables nested deeper than {MAX_VALUE_DEPTH}")
    try:
        data = tomllib.loads(f"v = {s}")
    except tomllib.TOMLDecodeError as e:
        if not s or s[0] in "\"'[{":
            raise ValueError(f"not a TOML value ({e})") from None
        return s
    except RecursionError:  # pragma: no cover - the depth is capped above
        raise ValueError("arrays or tables nested too deeply") from None
    if set(data) != {"v"}:  # e.g. ``1 # x`` is one value, but nothing may follow it
        raise ValueError("not one TOML value")
    return data["v"]


def parse_path(key: str) -> tuple[str | int, ...]:
    """``services[0].replicas`` → ("services", 0, "replicas"); ``ValueError`` if malformed."""
    if not key:
        raise ValueError("empty key")
    out: list[str | int] = []
    for seg in key.split("."):
        m = _SEGMENT.match(seg)
        if m is None:
            raise ValueError(
                f"malformed key {key!r} (use dotted names like hall.ultraservers or services[0].replicas)"
            )
        out.append(m.group(1))
        out.extend(int(i) for i in _INDEX.findall(m.group(2)))
    if len(out) > MAX_DEPTH:
        raise ValueError(f"key {key!r} is nested too deeply")
    return tuple(out)


def parse_set(arg: str) -> Override:
    """Parse one ``KEY=VALUE`` argument; ``ScenarioError`` naming the argument if malformed."""
    shown = arg if len(arg) <= 80 else arg[:77] + "..."
    if len(arg) > MAX_SET_LEN:
        raise ScenarioError(f"--set {shown}: longer than {MAX_SET_LEN} characters")
    if "=" not in arg:
        raise ScenarioError(f"--set {shown}: expected KEY=VALUE (e.g. hall.ultraservers=32)")
    key, text = arg.split("=", 1)
    key = key.strip()
    bad = _control_char(key)
    if bad is not None:
        raise ScenarioError(f"--set {_printable(shown)}: the key contains the control character {bad}")
    try:
        path = parse_path(key)
        value = UNSET if not text.strip() else parse_value(text)
    except ValueError as e:
        raise ScenarioError(f"--set {_printable(shown)}: {e}") from None
    if value is UNSET and isinstance(path[-1], int):
        raise ScenarioError(f"--set {_printable(shown)}: an element of a list cannot be unset")
    return Override(key, path, value, arg)


def _printable(text: str) -> str:
    """``text`` with control and line-breaking characters escaped (``\\n``, ``\\x01``): safe in
    one line of a message and in a TOML comment."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if ch != "\t" and unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        else ch
        for ch in text
    )


def make(key: str, value: Any) -> Override:
    """An override from a key and an already-typed value (sweep files, ``twin plan``)."""
    try:
        path = parse_path(key)
    except ValueError as e:
        raise ScenarioError(f"{key}: {e}") from None
    return Override(key, path, value, f"{key}={_toml_value(value)}")


def _toml_value(v: Any) -> str:
    try:
        import tomlkit

        return str(tomlkit.item(v).as_string())
    except Exception:
        return repr(v)


class _PathError(ValueError):
    pass


def _set(root: Any, o: Override) -> None:
    """Set ``o`` in a TOML container (plain dicts and lists, or tomlkit's), creating missing tables."""
    node = root
    where: list[str] = []
    for i, part in enumerate(o.path[:-1]):
        nxt = o.path[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                raise _PathError(f"{'.'.join(where) or o.key} has no element [{part}]")
            node = node[part]
            where[-1] += f"[{part}]"
            continue
        where.append(part)
        if not hasattr(node, "keys"):
            raise _PathError(f"{'.'.join(where[:-1])} is not a table")
        if part not in node:
            if isinstance(nxt, int):
                hint = spec.did_you_mean(part, [k for k in node.keys() if isinstance(node[k], list)])
                raise _PathError(f"{'.'.join(where)} is not a list in this scenario{hint}")
            node[part] = {}
        node = node[part]
    last = o.path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or not -len(node) <= last < len(node):
            raise _PathError(f"{'.'.join(where) or o.key} has no element [{last}]")
        node[last] = o.value
    else:
        if not hasattr(node, "keys"):
            raise _PathError(f"{'.'.join(where)} is not a table")
        if o.value is UNSET:
            node.pop(last, None)
        else:
            node[last] = o.value


def _present(root: Any, path: tuple[str | int, ...]) -> bool:
    node = root
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                return False
        elif not hasattr(node, "keys") or part not in node:
            return False
        node = node[part]
    return True


def _apply_to(root: Any, overrides: list[Override]) -> None:
    for o in overrides:
        if o.value is UNSET:
            variants = root.get("variants") if hasattr(root, "get") else None
            anywhere = _present(root, o.path) or (
                isinstance(variants, list) and any(_present(v, o.path) for v in variants)
            )
            if not anywhere:
                raise ScenarioError(f"{o}: {o.key} is not set in this scenario (nothing to unset)")
        try:
            if o.value is not UNSET or _present(root, o.path):
                _set(root, o)
        except _PathError as e:
            raise ScenarioError(f"{o}: {e}") from None
        variants = root.get("variants") if hasattr(root, "get") else None
        if isinstance(variants, list) and o.path[0] != "variants":
            for v in variants:
                if hasattr(v, "keys") and o.path[0] in v and (o.value is not UNSET or _present(v, o.path)):
                    try:
                        _set(v, o)
                    except _PathError as e:
                        raise ScenarioError(f"{o}: variant {v.get('name')!r}: {e}") from None


def apply(data: dict[str, Any], overrides: list[Override]) -> dict[str, Any]:
    """A copy of raw scenario data with the overrides applied. An override that switches a hall's
    (or row's) system without restating the keys written for the old one ([hardware],
    tco.system_capex_usd, a row's capex_usd) is refused: see ``spec.system_carry_over``."""
    out = copy.deepcopy(data)
    _apply_to(out, overrides)
    _check_carry_over(data, out, overrides)
    return out


def _check_carry_over(before: dict[str, Any], after: dict[str, Any], overrides: list[Override]) -> None:
    """Refuse per-system keys carried to another system, in the base and in every variant."""
    if not overrides:
        return
    restated = spec.restated_by([o.path for o in overrides])
    pairs = [(before, after, "")]
    vb, va = before.get("variants"), after.get("variants")
    if isinstance(vb, list) and isinstance(va, list):
        for b, a in zip(vb, va, strict=False):
            if isinstance(b, dict) and isinstance(a, dict):
                base_b = {k: v for k, v in before.items() if k != "variants"}
                base_a = {k: v for k, v in after.items() if k != "variants"}
                label = f"variant {a.get('name')!r}: "
                pairs.append((spec.merged_variant(base_b, b), spec.merged_variant(base_a, a), label))
    for b, a, label in pairs:
        msg = spec.system_carry_over(b, a, restated, override=True)
        if msg:
            raise ScenarioError(_blame(label + msg, overrides))


def validate_raw(data: dict[str, Any], origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Validate raw scenario data (variants included) as if it had been read from a file called
    ``origin``. The one place this module depends on how spec.py turns TOML into a Scenario."""
    return spec.load_scenario_dict(data, origin, base_dir)


def _dump(data: dict[str, Any]) -> str:
    import tomlkit

    return tomlkit.dumps(data)


def effective_text(text: str, overrides: list[Override], origin: str) -> str:
    """The scenario text with the overrides applied: values replaced in place (comments kept) and a
    comment naming them. Re-parses to exactly ``apply(tomllib.loads(text), overrides)``."""
    if not overrides:
        return text
    import tomlkit

    want = apply(tomllib.loads(text), overrides)
    header = "".join(f"{OVERRIDE_LINE}{_printable(o.arg)}\n" for o in overrides)
    header = f"{OVERRIDES_HEAD}{origin} with\n{header}\n"
    try:
        doc = tomlkit.parse(text)
        _apply_to(doc, overrides)
        out = header + tomlkit.dumps(doc)
        if tomllib.loads(out) == want:
            return out
    except Exception:  # a layout tomlkit cannot edit in place: write the data out plainly instead
        pass
    out = header + _dump(want)
    if tomllib.loads(out) != want:  # pragma: no cover - tomlkit round-trips plain data
        raise ScenarioError(
            f"{origin}: the scenario with {', '.join(map(str, overrides))} cannot be written as TOML"
        )
    return out


def _blame(msg: str, overrides: list[Override]) -> str:
    """Prefix a validation message with the ``--set`` argument it concerns (or all of them)."""
    for o in overrides:
        if re.search(rf"(^|[\s:.]){re.escape(o.key)}($|[\s:.\[])", msg):
            return f"{o}: {msg}"
    return f"{' '.join(map(str, overrides))}: {msg}"


def base_dir_of(origin: str) -> Path | None:
    """Where relative file paths of a scenario loaded by ``spec.load`` start."""
    return None if origin.startswith("builtin:") else Path(origin).parent


def with_overrides(
    scenario: Scenario, text: str, origin: str, overrides: list[Override]
) -> tuple[Scenario, str]:
    """The validated scenario with the overrides applied and its effective text."""
    if not overrides:
        return scenario, text
    new_data = apply(tomllib.loads(text), overrides)
    try:
        new = validate_raw(new_data, origin, base_dir_of(origin))
    except ScenarioError as e:
        raise ScenarioError(_blame(str(e), overrides)) from None
    return new, effective_text(text, overrides, origin)


def load(name_or_path: str, sets: list[str] | tuple[str, ...] = ()) -> tuple[Scenario, str, str]:
    """``spec.load`` plus ``--set`` arguments: (scenario, effective text, origin)."""
    overrides = [parse_set(s) for s in sets]
    scenario, text, origin = spec.load(name_or_path)
    new, eff = with_overrides(scenario, text, origin, overrides)
    return new, eff, origin
