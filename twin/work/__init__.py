"""The work side: who runs where. The chip pool, the job table and log, arrivals, queues and the
scheduler, services and serving with their inference roofline, the fabric and workload formulas,
failures and outages, routing across systems and the cluster that steps them.

Imports ``twin.spec``, ``twin.physics`` and itself: never ``twin.compose`` (nor storage,
scenarios or tui). ``tests/test_architecture.py`` enforces it.
"""
