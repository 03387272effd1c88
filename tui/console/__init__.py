"""The console's headless core: what drives a session or a recording without any UI.

``simloop.SimLoop`` advances a live session at the selected speed, ``panels.PanelLoader`` runs the
panels' SQL on its own cursor (the newest request per screen), ``sqlrunner.SqlRunner`` runs user
SQL in the sandbox (cancel, request ids) and ``core.Console`` holds the state the screens show.
None of them imports Textual: they take plain callbacks and run in whatever thread is given them;
``tui.app.TwinApp`` adapts them to the terminal UI.
"""
