"""Topology: hall -> rows (one CDU each) -> UltraServers -> servers -> chips, as index arrays.

Built once per run and never mutated. Chip ``c`` sits on server ``chip_server[c]`` inside
UltraServer ``chip_us[c]`` in row ``us_row[chip_us[c]]``. Aggregation over any level is a
``np.bincount`` with these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int32]


@dataclass(frozen=True)
class Topology:
    ultraservers: int
    chips_per_us: int
    servers_per_us: int
    rows: int
    chip_us: IntArray  # [chips] UltraServer of each chip
    chip_server: IntArray  # [chips] global server index of each chip
    us_row: IntArray  # [ultraservers] row (CDU) of each UltraServer

    @property
    def chips(self) -> int:
        return self.ultraservers * self.chips_per_us

    @property
    def servers(self) -> int:
        return self.ultraservers * self.servers_per_us

    @property
    def chips_per_server(self) -> int:
        return self.chips_per_us // self.servers_per_us

    def per_us(
        self, chip_values: npt.NDArray[np.floating] | npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.float64]:
        """Sum a per-chip quantity over each UltraServer (chips are contiguous per UltraServer,
        so this is a reshape and a row sum)."""
        out: npt.NDArray[np.float64] = (
            np.asarray(chip_values, dtype=np.float64)
            .reshape(self.ultraservers, self.chips_per_us)
            .sum(axis=1)
        )
        return out

    def max_per_us(self, chip_values: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
        """Maximum of a per-chip quantity in each UltraServer."""
        out: npt.NDArray[np.float64] = (
            np.asarray(chip_values, dtype=np.float64)
            .reshape(self.ultraservers, self.chips_per_us)
            .max(axis=1)
        )
        return out

    def per_row(self, us_values: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
        """Sum a per-UltraServer quantity over each row."""
        return np.bincount(self.us_row, weights=us_values, minlength=self.rows).astype(np.float64)


def build(ultraservers: int, chips_per_us: int, servers_per_us: int, us_per_row: int) -> Topology:
    if ultraservers < 1 or chips_per_us < 1 or servers_per_us < 1 or us_per_row < 1:
        raise ValueError("topology sizes must be positive")
    if chips_per_us % servers_per_us:
        raise ValueError("chips per UltraServer must divide evenly into servers")
    chips = ultraservers * chips_per_us
    cps = chips_per_us // servers_per_us
    chip_us = np.repeat(np.arange(ultraservers, dtype=np.int32), chips_per_us)
    chip_server = (np.arange(chips, dtype=np.int32) // cps).astype(np.int32)
    us_row = (np.arange(ultraservers, dtype=np.int32) // us_per_row).astype(np.int32)
    rows = int(us_row[-1]) + 1
    for arr in (chip_us, chip_server, us_row):
        arr.setflags(write=False)
    return Topology(ultraservers, chips_per_us, servers_per_us, rows, chip_us, chip_server, us_row)
