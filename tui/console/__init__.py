"""The console's headless core: what drives a session or a recording without any UI.

``simloop.SimLoop`` advances a live session at the selected speed, ``panels.PanelLoader`` runs the
panels' SQL on its own cursor (the newest request per screen), ``sqlrunner.SqlRunner`` runs user
SQL in the sandbox (cancel, request ids) and ``core.Console`` holds the state the screens show.
Beside them what the screens read: ``feed`` (the live data and the panel requests), ``replay``
(a recorded run), ``meta`` (the run's facts, the panels' query parameters), ``history`` (the live
plots' rolling buffers), ``pacing`` (speed
levels, slices, redraw budget), ``whatif`` (the what-if targets), ``alarms``, ``scale`` (colour
scales) and ``fmt`` (number and time formats).

None of them imports Textual, nor ``tui.app``, ``tui.screens`` or ``tui.widgets``: they take plain
callbacks and run in whatever thread is given them; ``tui.app.TwinApp`` adapts them to the
terminal UI. ``tests/test_architecture.py`` enforces it.
"""
