"""The what-if menu (i): pick a what-if by its letter, adjust its value and duration, Enter
injects it. Targets follow the selection on the Floor and UltraServer screens."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.console.whatif import WHAT_IFS, Context, WhatIf, build, summary

Injection = tuple[str, str, float, int, str]  # kind, target, value, duration_s, summary


class WhatIfScreen(ModalScreen[Injection | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.current: WhatIf = WHAT_IFS[0]

    def compose(self) -> ComposeResult:
        with Vertical(id="whatif-box"):
            yield OptionList(
                *[Option(f"{w.key}  {w.title:<22} {w.describe(self.ctx)}", id=w.key) for w in WHAT_IFS],
                id="whatif-list",
            )
            with Horizontal(id="whatif-fields"):
                yield Static("", id="whatif-value-label", markup=False)
                yield Input(id="whatif-value", compact=True)
                yield Static("", id="whatif-duration-label", markup=False)
                yield Input(id="whatif-duration", compact=True)
            yield Static("", id="whatif-summary", markup=False)

    def on_mount(self) -> None:
        box = self.query_one("#whatif-box")
        box.border_title = "What-if · applied at the next step, recorded as an operator event"
        box.border_subtitle = "letter picks · ⇥ edit values · ⏎ inject · esc cancels"
        lst = self.query_one(OptionList)
        lst.highlighted = 0
        lst.focus()
        self._fill(WHAT_IFS[0])

    def _fill(self, w: WhatIf) -> None:
        self.current = w
        val = self.query_one("#whatif-value", Input)
        dur = self.query_one("#whatif-duration", Input)
        self.query_one("#whatif-value-label", Static).update(w.value_label or "(no value)")
        val.value = f"{w.value_default(self.ctx):g}" if w.value_label else ""
        val.disabled = not w.value_label
        self.query_one("#whatif-duration-label", Static).update(w.duration_label or "(no duration)")
        dur.value = f"{w.duration_h:g}" if w.duration_label else ""
        dur.disabled = not w.duration_label
        self._summary()

    def _values(self) -> tuple[float | None, float | None]:
        w = self.current
        v = self.query_one("#whatif-value", Input).value.strip()
        d = self.query_one("#whatif-duration", Input).value.strip()
        return (float(v) if w.value_label and v else None, float(d) if w.duration_label and d else None)

    def _summary(self) -> None:
        try:
            v, d = self._values()
            text = summary(self.current, self.ctx, v, d)
        except ValueError:
            text = "not a number"
        self.query_one("#whatif-summary", Static).update(text)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._fill(next(w for w in WHAT_IFS if w.key == event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.apply()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._summary()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.apply()

    def on_key(self, event: events.Key) -> None:
        if isinstance(self.focused, OptionList) and event.character:
            for i, w in enumerate(WHAT_IFS):
                if w.key == event.character:
                    self.query_one(OptionList).highlighted = i
                    event.stop()
                    return

    def apply(self) -> None:
        try:
            v, d = self._values()
            kind, target, value, dur = build(self.current, self.ctx, v, d)
        except ValueError as e:
            self.notify(
                str(e) if "non-negative" in str(e) else "value and duration must be numbers", severity="error"
            )
            return
        self.dismiss((kind, target, value, dur, summary(self.current, self.ctx, v, d)))

    def action_cancel(self) -> None:
        self.dismiss(None)
