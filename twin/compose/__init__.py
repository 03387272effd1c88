"""The compositions: a pool (one system's facility and work stepped together), a hall of pools,
a campus of halls, the floor plan, the grid connection's waveforms, the per-advance recorder and
the ``sim`` entry point.

The top room of the model: it may import every other room of ``twin`` but never storage,
scenarios or tui. ``tests/test_architecture.py`` enforces it.
"""
