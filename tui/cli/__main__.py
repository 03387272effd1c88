"""``python -m tui.cli``: the ``twin`` command."""

from tui.cli import main

main()
