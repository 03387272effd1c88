"""Rack loops and thermal protection of one facility's UltraServers.

``rack_loops`` moves the loops over a step; ``protect`` lowers the clocks of chips above their
throttle curve inside the step; ``Trips`` holds which UltraServers are powered off by their
junctions (``shutdown``) or their coolant (``loop_trips``) and brings them back. The relations are
``twin.physics.cooling``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from twin.physics import cooling
from twin.physics.capping import Chips
from twin.physics.design import Design
from twin.physics.itpower import ItPower
from twin.physics.load import Load
from twin.physics.plant import PlantState
from twin.physics.steps import Heat
from twin.spec.events import Events
from twin.spec.params import CoolingParams

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
_NO_US = np.zeros(0, dtype=np.int64)  # no UltraServer shut down (read-only)
_NO_US.setflags(write=False)
_NO_CHIPS = _NO_US  # no chip going off or coming back (read-only)


def rack_loops(
    cp: CoolingParams,
    lf: float,
    mass_kg: float,
    chw_supply_c: float,
    liquid_us: FloatArray,
    m: FloatArray,
    sec_supply: float,
    ret0: FloatArray,
    dt_s: int,
) -> tuple[FloatArray, FloatArray]:
    """(return temperature, coolant the cold plates see) per UltraServer [°C] after ``dt_s``
    with ``liquid_us`` [W] into each loop at mass flow ``m`` [kg/s]: the exact solution of
    C dT/dt = Q - m c_p (T - T_supply); a loop without flow stores the heat. Flowing loops
    present the mean of supply and return to the plates, a stagnant loop its own
    temperature; air-cooled systems (``lf`` 0) see the CRAH supply air."""
    if lf <= 0:
        return ret0, np.full(len(ret0), cooling.crah_supply_air_c(chw_supply_c, cp))
    ret = cooling.loop_return_c(ret0, sec_supply, liquid_us, m, mass_kg, dt_s)
    return ret, cooling.plate_coolant_c(sec_supply, ret, m > 0)


@dataclass
class Racks:
    """The UltraServers' rack loops: their return temperatures, thermal mass, variable-speed
    pumps and cold plates (design values from ``twin.physics.design``)."""

    cp: CoolingParams
    lf: float  # liquid-cooled share of IT heat [-]
    d: Design
    us_row: npt.NDArray[np.int32]
    return_c: FloatArray  # rack loop return per UltraServer [°C]
    # ``us_flow``'s rows' fractions and (health, resistance, all healthy) per UltraServer.
    _flow_of: FloatArray | None = field(default=None, init=False, repr=False)
    _flow: tuple[FloatArray, FloatArray, bool] = field(init=False, repr=False)

    @property
    def liquid_design_w(self) -> float:
        """Heat into one loop at design [W]."""
        return max(self.lf * self.d.us_full_load_dc_w, 1.0)

    def us_flow(self, row_flow_fraction: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(CDU pump health, junction-to-coolant resistance [K/W]) per UltraServer at the rows'
        ``row_flow_fraction``: derived again only for another array (a CDU fault began or
        ended; the rows' fractions are replaced, never written in place). Read-only."""
        if row_flow_fraction is not self._flow_of:
            flow_frac = row_flow_fraction[self.us_row]
            r_us = self.r_us(flow_frac)
            flow_frac.setflags(write=False)
            r_us.setflags(write=False)
            self._flow_of, self._flow = row_flow_fraction, (flow_frac, r_us, bool(flow_frac.min() >= 1.0))
        return self._flow[0], self._flow[1]

    def step(
        self,
        pw: ItPower,
        clock: FloatArray,
        full_clock: bool,
        dyn_full: FloatArray | None,
        reclocked: bool,
        row_flow_fraction: FloatArray,
        plant: PlantState,
        dt_s: int,
    ) -> Heat:
        """The loops over a step at IT power ``pw`` (the chips at ``clock``; ``reclocked``: a cap
        lowered it inside the step), from the plant's supply at its start (``plant``): the pumps'
        speed is set from the load at this step's clock and held for the step; a row whose CDU
        pumps are lost has no flow and its loops store the heat. The hottest junction of an
        UltraServer is its highest-power chip's (one coolant, one resistance per UltraServer):
        per-chip temperatures are needed only when that is hot. ``return_c`` is left as it was."""
        sec_supply = cooling.loop_supply_c(plant.fw_supply_c, self.cp)
        # Pump speed and mass flow: variable-speed flow holds the design temperature rise; a row
        # whose CDU pumps are lost has no flow.
        flow_frac, r_us = self.us_flow(row_flow_fraction)
        liquid_us = self.lf * pw.us_it
        speed = cooling.loop_pump_speed(liquid_us, self.liquid_design_w)
        if not self._flow[2]:  # x 1 where every CDU is healthy: the same speeds
            speed = speed * flow_frac
        m = self.d.us_design_flow_kg_s * speed
        ret0 = self.return_c
        ret, coolant = self.run(liquid_us, m, sec_supply, plant.chw_supply_c, ret0, dt_s)
        us_tj_max = cooling.junction_c(coolant, r_us, pw.us_chip_max_w)
        return Heat(
            pw,
            clock,
            full_clock,
            ret,
            coolant,
            r_us,
            us_tj_max,
            speed,
            flow_frac,
            _NO_US,
            ret0,
            reclocked,
            dyn_full,
            m,
            liquid_us,
        )

    def coolant_now(
        self, speed: FloatArray, row_flow_fraction: FloatArray, fw_supply_c: float
    ) -> tuple[FloatArray, FloatArray]:
        """(coolant the cold plates see [°C], their resistance [K/W]) per UltraServer right after
        the CDU flow changed from pump speed ``speed``: the loops at their current temperatures
        (stagnant loops are one mixed volume)."""
        flow_frac, r_us = self.us_flow(row_flow_fraction)
        sec = cooling.loop_supply_c(fw_supply_c, self.cp)
        return cooling.plate_coolant_c(sec, self.return_c, speed * flow_frac > 0), r_us

    def run(
        self,
        liquid_us: FloatArray,
        m: FloatArray,
        sec_supply: float,
        chw_supply_c: float,
        ret0: FloatArray,
        dt_s: int,
    ) -> tuple[FloatArray, FloatArray]:
        """``rack_loops`` over ``dt_s`` from ``ret0`` with ``liquid_us`` (the liquid share of
        each UltraServer's IT power) into the loops."""
        return rack_loops(
            self.cp, self.lf, self.d.us_loop_mass_kg, chw_supply_c, liquid_us, m, sec_supply, ret0, dt_s
        )

    def r_us(self, flow_frac: FloatArray) -> FloatArray:
        """Junction-to-coolant resistance per UltraServer [K/W] at the CDU pumps' health
        (``cooling.cold_plate_r_k_per_w``; air-cooled systems: the heat sinks')."""
        if self.lf <= 0:
            return np.full(len(flow_frac), self.d.air_r_k_per_w)
        cp = self.cp
        return cooling.cold_plate_r_k_per_w(
            self.d.cold_plate_r_k_per_w,
            cp.cold_plate_convective_share,
            cp.natural_convection_speed,
            flow_frac,
        )


def protect(
    cp: CoolingParams,
    ch: Chips,
    chip_us: npt.NDArray[np.int32],
    tj: FloatArray,
    clock: FloatArray,
    powered: BoolArray,
    dyn_full: FloatArray,
    coolant_us: FloatArray,
    r_us: FloatArray,
) -> tuple[FloatArray, IntArray] | None:
    """Clocks protected against this step's coolant and the UltraServers to shut down, or
    None when every chip is within its throttle curve (0.05 K tolerance). Each chip with its own
    resistance factor h and idle power g P_idle (``ch``: ``twin.physics.capping.Chips``; ``dyn_full``
    carries g)."""
    # Every powered chip, idle ones too (an idle chip with a large spread may run hotter than a
    # throttled busy one; its firmware holds it at the clock of its curve all the same; only busy
    # chips shut down, below).
    over = (tj > cooling.allowed_junction_c(clock, cp) + 0.05) & powered
    if not over.any():
        return None
    k = cp.dvfs_exponent
    idx = np.flatnonzero(over)
    r = r_us[chip_us[idx]] * ch.r_scale[idx]
    base = cooling.junction_c(coolant_us[chip_us[idx]], r, ch.idle_chip[idx])
    f = cooling.thermal_clock(base, r * dyn_full[idx], clock[idx], k, cp)
    clock = clock.copy()
    clock[idx] = np.minimum(clock[idx], f)
    hot = cooling.junction_dyn_c(base, r * dyn_full[idx], clock[idx] ** k) > cp.shutdown_temp_c
    # Only a busy chip shuts its UltraServer down (as before the spread: an idle chip past the
    # limit is held at its lowest clock, not powered off).
    hot &= dyn_full[idx] > 0
    shut = np.unique(chip_us[idx[hot]]).astype(np.int64)
    return clock, shut


@dataclass
class Trips:
    """UltraServers powered off by thermal protection, and until when one shut down by its
    junctions stays off."""

    chip_us: npt.NDArray[np.int32]
    us_tripped: BoolArray
    chip_tripped: BoolArray
    us_hold_until: IntArray  # junction shutdown: off at least until [s]

    @classmethod
    def none(cls, chip_us: npt.NDArray[np.int32], ultraservers: int) -> Trips:
        return cls(
            chip_us,
            np.zeros(ultraservers, dtype=bool),
            np.zeros(len(chip_us), dtype=bool),
            np.zeros(ultraservers, dtype=np.int64),
        )

    def shutdown(self, shut: IntArray, alive: BoolArray, limit_c: float, ev: Events) -> None:
        """UltraServers whose junctions cannot be held even at the lowest clock power off now."""
        if not len(shut):
            return
        self.us_tripped[shut] = True
        self.chip_tripped |= np.isin(self.chip_us, shut) & alive
        for us in shut.tolist():
            ev.append(
                (
                    "thermal_shutdown",
                    f"ultraserver:{us}",
                    f"junction above {limit_c:.0f} °C at the lowest clock: powered off",
                )
            )

    def loop_trips(
        self,
        cp: CoolingParams,
        lf: float,
        ret: FloatArray,
        coolant: FloatArray,
        flow_frac: FloatArray,
        load: Load,
        shut: IntArray,
        t_s: int,
        ev: Events,
        inlet_air_c: float | None = None,
    ) -> tuple[IntArray, IntArray]:
        """Loop protection at the end of the step: an UltraServer whose coolant runs past its
        trip point powers off (chips, hosts, switches) and comes back once its coolant has
        cooled and its CDU runs again (one shut down by its junctions, ``shut``, not before its
        hold time). A liquid-cooled UltraServer's air-cooled share (hosts, NICs, power
        supplies) has the air-cooled systems' limit too: it powers off when its inlet air
        (``inlet_air_c``, the CRAH supply) passes ``air_trip_c`` and needs it below
        ``air_restart_c`` to come back. ``load``: the step's, whose powered chips go off.
        Returns (chips going off, chips coming back)."""
        hot_us = _hot(cp, lf, ret, coolant, inlet_air_c)
        any_tripped = bool(self.us_tripped.any())
        newly = hot_us & ~self.us_tripped if any_tripped else hot_us
        back = None  # none to bring back while none is off (the common step)
        if any_tripped:
            cool_us = _cool(cp, lf, ret, coolant, flow_frac, inlet_air_c)
            back = cool_us & self.us_tripped & (self.us_hold_until <= t_s)
        tripped_chips = recovered_chips = _NO_CHIPS
        if newly.any():
            tripped_chips = self._trip(cp, lf, ret, coolant, newly, load, ev, inlet_air_c)
        if len(shut):
            tripped_chips = np.union1d(
                tripped_chips, np.flatnonzero(np.isin(self.chip_us, shut) & load.alive)
            )
            self.us_hold_until[shut] = t_s + cp.shutdown_restart_s
            if back is not None:
                back[shut] = False
        if back is not None and back.any():
            self.us_tripped &= ~back
            mask = back[self.chip_us] & self.chip_tripped
            self.chip_tripped &= ~mask
            recovered_chips = np.flatnonzero(mask)
            for u in np.flatnonzero(back).tolist():
                ev.append(("thermal_recover", f"ultraserver:{u}", f"coolant {coolant[u]:.1f} °C: back on"))
        return tripped_chips, recovered_chips

    def _trip(
        self,
        cp: CoolingParams,
        lf: float,
        ret: FloatArray,
        coolant: FloatArray,
        newly: BoolArray,
        load: Load,
        ev: Events,
        inlet_air_c: float | None,
    ) -> IntArray:
        """Power off the ``newly`` hot UltraServers (their powered chips), one event each naming
        what tripped it. Returns the chips going off."""
        self.us_tripped |= newly
        mask = newly[self.chip_us] & load.alive
        self.chip_tripped |= mask
        air = lf > 0 and inlet_air_c is not None and inlet_air_c > cp.air_trip_c
        for u in np.flatnonzero(newly).tolist():
            why = (
                f"inlet air {inlet_air_c:.1f} °C"
                if air and not ret[u] > cp.loop_trip_c
                else f"coolant {coolant[u]:.1f} °C"
            )
            ev.append(("thermal_trip", f"ultraserver:{u}", f"{why}: powered off"))
        return np.flatnonzero(mask)


def _hot(
    cp: CoolingParams, lf: float, ret: FloatArray, coolant: FloatArray, inlet_air_c: float | None
) -> BoolArray:
    """UltraServers past their trip point: loop return (and, for a partly air-cooled system,
    inlet air) with liquid cooling, coolant (the air) without."""
    if lf > 0:
        hot_us = ret > cp.loop_trip_c
        if inlet_air_c is not None and lf < 1:
            hot_us = hot_us | (inlet_air_c > cp.air_trip_c)
        return hot_us
    return coolant > cp.air_trip_c


def _cool(
    cp: CoolingParams,
    lf: float,
    ret: FloatArray,
    coolant: FloatArray,
    flow_frac: FloatArray,
    inlet_air_c: float | None,
) -> BoolArray:
    """UltraServers cool enough to come back: loop return below restart with their CDU running
    (and inlet air below its restart) with liquid cooling, coolant below restart without."""
    if lf > 0:
        cool_us = (ret < cp.loop_restart_c) & (flow_frac > 0)
        if inlet_air_c is not None and lf < 1:
            cool_us = cool_us & (inlet_air_c < cp.air_restart_c)
        return cool_us
    return coolant < cp.air_restart_c
