"""The commands that show the TUI: the live session (`twin` with no command) and `twin replay`.

Textual is imported inside them only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tui.cli.emit import chunk_hook, start_emit
from tui.cli.errors import guard
from tui.cli.metrics import start_metrics
from tui.cli.options import default_out


@guard
def live(
    scenario: str,
    seed: int | None,
    out: str | None,
    metrics_port: int | None = None,
    sets: tuple[str, ...] = (),
    emits: tuple[str, ...] = (),
) -> None:
    from scenarios.overrides import load
    from scenarios.runner import Session
    from storage.paths import check_run_output
    from tui.cli.runs import scenario_inputs

    spec, text, _ = load(scenario, sets)
    path = check_run_output(
        Path(out) if out else default_out(spec.name), scenario_inputs(scenario, spec, text)
    )
    metrics = start_metrics(metrics_port)
    emitters = start_emit(emits, spec)
    if spec.warmup_h > 0:
        click.echo(f"{spec.name}: warming up {spec.warmup_h:g} h (simulated, not recorded)…", err=True)
    session = Session(
        spec,
        text,
        path,
        seed=seed,
        duration_s=spec.longest_run_s(),
        on_chunk=chunk_hook(metrics, emitters),
    )
    if metrics:
        metrics.set_run(run_id=session.run_id, scenario=spec.name, file=str(path))
    from tui.app import TwinApp

    app = TwinApp(session=session)
    reason = ""
    try:
        app.run()
    except Exception as e:
        reason = f"{type(e).__name__}: {str(e).strip()[:500]}"
        raise
    finally:
        if not reason and (app.return_code or 0) != 0:
            reason = "the terminal UI ended on an error"
        try:
            # A write error of the session makes it ``failed`` with that reason (and raises it).
            session.close("failed" if reason else "stopped", reason)
        finally:
            if metrics:
                metrics.close()
            if emitters:
                emitters.close()
    click.echo(f"Session recorded to {path}  (twin sql {path} / twin replay {path})")
    if reason:
        from tui.cli.errors import EXIT_SOFTWARE, fail

        fail(f"the live session ended on an error; recorded 'failed' in {path}", code=EXIT_SOFTWARE)
    if app.terminated:
        click.echo("twin: terminated (SIGTERM); the session is recorded 'stopped'", err=True)
        sys.exit(143)


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@guard
def replay_cmd(file: str) -> None:
    """Show a recorded run in the TUI with a time scrubber."""
    from storage.liveread import open_for_reading
    from storage.reader import latest_run_id
    from storage.recording import reading as reading_errors

    reading = open_for_reading(file, snapshot=True)  # checked: ``storage.recording``
    con = reading.con
    if reading.in_progress:
        click.echo(reading.note, err=True)
    try:
        with reading_errors(file):
            run_id = latest_run_id(con)
    except BaseException:
        con.close()
        raise
    from tui.app import TwinApp

    app = TwinApp(replay_con=con, replay_run_id=run_id, replay_path=file)
    app.run()
    con.close()
    if (app.return_code or 0) != 0:  # Textual printed the traceback and returned
        from tui.cli.errors import EXIT_SOFTWARE, fail

        fail(
            f"the replay of {file} ended on an error (a bug in twin; the traceback is above)",
            code=EXIT_SOFTWARE,
        )
    if reading.in_progress:  # again after the screen is restored
        click.echo(reading.note.replace("showing", "showed"), err=True)
