"""Widgets of the AI Factory Twin TUI (each module holds one widget family)."""
