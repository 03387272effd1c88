"""A recorded run as the console reads it: its facts (``Meta``) and its time axis; the panels run
their SQL on the file. No Textual imports here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tui.console.meta import Meta, model_facts, params_from_toml, run_design, scenario_label, us_halls


class ReplayFeed:
    """A recorded run: its facts and its time axis; panels run their SQL on the file."""

    def __init__(self, con: Any, run_id: str, path: str) -> None:
        from storage.errors import StorageError

        self.con = con
        self.run_id = run_id
        try:
            runs = (
                con.sql("SELECT * FROM runs WHERE run_id = ?", params=[run_id]).to_arrow_table().to_pylist()
            )
            if not runs:
                raise StorageError(f"{path}: no run {run_id!r}")
            run = runs[0]
            self.times = (
                con.sql("SELECT time_s FROM factory_ts WHERE run_id = ? ORDER BY time_s", params=[run_id])
                .to_arrow_table()
                .column(0)
                .to_numpy()
                .astype(np.int64)
            )
            first = int(self.times[0]) if len(self.times) else 0
            rows = (
                con.sql(
                    "SELECT row_id FROM ultraserver_ts WHERE run_id = ? AND time_s = ? ORDER BY ultraserver_id",
                    params=[run_id, first],
                )
                .to_arrow_table()
                .column(0)
                .to_pylist()
            )
        except StorageError:
            raise
        except Exception as e:  # a twin file whose tables are not what this version expects
            raise StorageError(f"{path}: cannot read the run ({str(e).splitlines()[0]})") from None
        self.status = str(run["status"])
        design = run_design(run)
        nus = int(run["ultraservers"])
        params = params_from_toml(run.get("scenario_toml"))
        chips_per_us = design.chips_per_us if design is not None else int(run["chips_total"]) // max(1, nus)
        servers = design.servers_per_us if design is not None else chips_per_us
        self.meta = Meta(
            mode="replay",
            scenario=scenario_label(str(run["scenario_name"]), run.get("scenario_toml")),
            path=str(path),
            run_id=run_id,
            dt_s=int(run["dt_s"]),
            ultraservers=nus,
            chips_total=int(run["chips_total"]),
            chips_per_us=chips_per_us,
            servers_per_us=int(servers),
            us_row=tuple(int(r) for r in rows) if len(rows) == nus else tuple(range(nus)),
            us_hall=us_halls(params, nus),
            **model_facts(design, params),
        )
        self.n = len(self.times)

    @property
    def t_first(self) -> int:
        return int(self.times[0]) if self.n else 0

    @property
    def t_last(self) -> int:
        return int(self.times[-1]) if self.n else 0

    def index_at(self, t_s: float) -> int:
        """Index of the last row at or before ``t_s`` (clamped to the run)."""
        i = int(np.searchsorted(self.times, t_s, side="right")) - 1
        return max(0, min(self.n - 1, i))

    def time_at(self, t_s: float) -> int:
        return int(self.times[self.index_at(t_s)]) if self.n else 0
