"""AI Factory Twin model: NumPy only, no I/O, no clock, no UI, no storage imports."""

__version__ = "0.1.0"
