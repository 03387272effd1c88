"""The facts without behaviour: the hardware catalog, the model registry, the run's parameters,
the telemetry tables, the topology's numbering, the TCO inputs, the random streams and the
event rows every phase reports.

The lowest room: it never imports ``twin.physics``, ``twin.work`` or ``twin.compose`` (nor
storage, scenarios or tui). ``tests/test_architecture.py`` enforces it.
"""
