"""The help screen: every key of the current mode, generated from the app's bindings."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static


def key_rows(app: object) -> list[tuple[str, str]]:
    """(keys, what they do) for the bindings enabled in the app's current mode."""
    from textual.app import App

    assert isinstance(app, App)
    merged: dict[tuple[str, str], list[str]] = {}  # (action, text) -> keys, in binding order
    for b in app.BINDINGS:
        if not isinstance(b, Binding):
            continue
        if app.check_action(b.action.split("(", 1)[0], ()) is False:
            continue
        keys = merged.setdefault((b.action, b.tooltip or b.description), [])
        keys += [app.get_key_display(Binding(k, b.action)) for k in b.key.split(",")]
    return [(" / ".join(keys), what) for (_, what), keys in merged.items()]


class HelpScreen(ModalScreen[None]):
    """Keys of the current mode; escape or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", key_display="?"),
    ]

    def compose(self) -> ComposeResult:
        rows = key_rows(self.app)
        width = max(len(k) for k, _ in rows) + 2
        parts: list[str | tuple[str, str]] = []
        for keys, what in rows:
            parts += [(keys.ljust(width), "bold $accent"), what, "\n"]
        parts.pop()
        with VerticalScroll(id="help-box"):
            yield Static(Content.assemble(*parts), id="help-keys")

    def on_mount(self) -> None:
        box = self.query_one("#help-box")
        box.border_title = "Keys"
        box.border_subtitle = "esc or ? closes"
