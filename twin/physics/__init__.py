"""The relations and the facility side: the power chain, cooling and the plant, the site and its
weather, the chips' IT power and junction temperatures, caps and protection, the timed effects and
the design derived once from the parameters.

Imports only ``twin.spec`` and itself: never ``twin.work`` or ``twin.compose`` (nor storage,
scenarios or tui). What it needs of the chips' load is the protocol in ``twin.physics.load``,
which the work side's ``twin.work.chips.Load`` satisfies. ``tests/test_architecture.py``
enforces it.
"""
