"""The help screen: every key, everywhere and per screen, generated from the bindings."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

EXTRA_GLOBAL = [
    ("ctrl+p", "Command palette: what-ifs, screens, speeds"),
    ("mouse", "Click a tab, a cell on the Floor or a chip; wheel scrolls tables"),
]


def _rows(bindings: list[Any], app: Any, check: Any = None) -> list[tuple[str, str]]:
    """(keys, what they do), bindings with the same action merged, in binding order."""
    merged: dict[tuple[str, str], list[str]] = {}
    for b in bindings:
        if not isinstance(b, Binding):
            continue
        if check is not None and check(b.action.split("(", 1)[0], ()) is False:
            continue
        keys = merged.setdefault((b.action, b.tooltip or b.description), [])
        keys += [app.get_key_display(Binding(k, b.action)) for k in b.key.split(",")]
    return [(" / ".join(keys), what) for (_, what), keys in merged.items()]


def key_rows(app: Any) -> list[tuple[str, str]]:
    """Keys of the app itself that are enabled in the current mode (live or replay)."""
    return _rows(list(app.BINDINGS), app, app.check_action)


def sections(app: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    """('Everywhere', rows) then one section per screen and for tables."""
    from tui.screens.base import TwinScreen
    from tui.widgets.arrowtable import ArrowTable

    out = [("Everywhere", key_rows(app) + EXTRA_GLOBAL)]
    base = _rows(list(TwinScreen.BINDINGS), app)
    out.append(("Every screen but SQL", base))
    base_keys = {k for k, _ in base}
    from tui.widgets.status import SCREENS

    for key, mode, label in SCREENS:
        cls = app.MODES[mode]
        rows = [r for r in _rows(list(cls.BINDINGS), app) if r[0] not in base_keys or mode == "sql"]
        if rows:
            out.append((f"{label} ({key.upper()})", rows))
    sideways = ("← →", "Scroll sideways (Jobs, Services, SQL result); [ ] still move the replay")
    focus = ("(focus)", "The row under the cursor shows cut text (…) whole")
    out.append(
        (
            "Tables (Jobs, Services, Alarms, SQL result, rows)",
            [*_rows(list(ArrowTable.BINDINGS), app), sideways, focus],
        )
    )
    from textual.widgets import TextArea

    from tui.screens.sql import SqlEditor

    screen_keys = {k for k, _, _ in SCREENS} | {"ctrl+c"}  # taken by the app everywhere
    own = [b for b in SqlEditor.BINDINGS if isinstance(b, Binding) and b.key != "question_mark"]
    taken = screen_keys | {b.key for b in own}
    editor = [*own]
    for b in TextArea.BINDINGS:
        if not isinstance(b, Binding):
            continue
        keys = [k for k in b.key.split(",") if k not in taken]  # an editor key of its own wins
        if keys and not set(b.key.split(",")) & screen_keys:
            editor.append(Binding(",".join(keys), b.action, b.description, show=b.show))
    out.append(("SQL editor (text)", [r for r in _rows(editor, app) if r[1]]))
    return out


class HelpScreen(ModalScreen[None]):
    """Every key; escape or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", key_display="?"),
    ]

    def compose(self) -> ComposeResult:
        secs = sections(self.app)
        width = max(len(k) for _, rows in secs for k, _ in rows) + 2
        parts: list[str | tuple[str, str]] = []
        for title, rows in secs:
            parts += [(title, "bold underline $foreground"), "\n"]
            for keys, what in rows:
                parts += [(keys.ljust(width), "bold $accent"), what, "\n"]
            parts.append("\n")
        while parts and parts[-1] == "\n":
            parts.pop()
        with VerticalScroll(id="help-box"):
            yield Static(Content.assemble(*parts), id="help-keys")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "Keys"
        box.border_subtitle = "esc or ? closes · ↑↓ scroll"
        box.focus()
