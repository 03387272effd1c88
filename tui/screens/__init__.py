"""Screens of the AI Factory Twin TUI, one per module."""
