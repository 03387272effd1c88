"""The facility part of one system's pool: chip clocks and power, rack loops, protection, caps.

``Facility.step_it`` turns the chips' load (``twin.physics.load.Load``: utilisation per job and
UltraServer, per chip when asked) into power, heat and temperatures for one step at its clocks
(lowered inside the step by a cap or junction protection); the hall runs the plant and the power
chain once on its pools' sums (``twin.compose.hall``); ``Facility.finish_step`` then decides the chips'
clocks for the next step (power capping and thermal throttling), so that the power drawn and the
work done in a step always use the same clock.

Heat path (liquid-cooled systems): cold plates -> each UltraServer's rack loop (thermal mass,
variable-speed flow) -> its row's CDU -> the facility water loop (thermal mass) -> economizer
(cooling towers with a plate heat exchanger, or dry coolers) with chiller trim. The air share goes
to CRAHs on chilled water from the same chillers. Every loop uses the exact solution of
C dT/dt = Q - m c_p (T - T_in) for piecewise-constant inputs, stable at any step size.

The parts: IT power (``twin.physics.itpower``), the rack loops and thermal protection (``twin.physics.thermal``),
the caps and the next clocks (``twin.physics.capping``: ``PowerCap``, ``OperatingPoint``), the plant
(``twin.physics.plant``: ``PlantDesign``, ``PlantState``), the timed effects (``twin.physics.effects``) and the
step's records (``twin.physics.steps``). ``Facility`` holds one of each and runs them in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from twin.physics import capping, cooling, design, effects, plant, power, steps, thermal
from twin.physics.itpower import ItPower, it_power
from twin.physics.load import Load
from twin.physics.plant import PlantState
from twin.physics.site import Conditions
from twin.physics.steps import FacilityStep, Heat, ItStep
from twin.spec import rng
from twin.spec.catalog import Accelerator, System
from twin.spec.events import Events
from twin.spec.params import CoolingParams, FactoryParams, PowerChainParams, ScheduledEvent
from twin.spec.topology import Topology

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

EVENT_KINDS = ("power_cap", "cdu_pump_failure", "chiller_trip", "cooling_tower_loss", "cooling_restore")

__all__ = ["EVENT_KINDS", "Facility", "FacilityStep", "ItPower", "ItStep", "PlantState"]


@dataclass(frozen=True)
class RanAt:
    """The clocks a campus hall's last step ran at (all full or not), and the coolant and
    cold-plate resistance they met: its next clocks are solved again from these when the
    campus moves the hall's share of its cap (``Facility.reclock_for_site_cap``)."""

    clock: FloatArray
    full_clock: bool
    coolant_us: FloatArray
    r_us: FloatArray


@dataclass
class Facility:
    params: FactoryParams
    topo: Topology
    sys: System
    acc: Accelerator
    run_design: design.Design | None = None  # the run's Design (derived here when not given)
    # The plant's state: a hall's one plant (``twin.compose.hall``), or a plant of its own when
    # not given; ``owns_plant``: the plant's faults are this facility's effects (a hall's first).
    shared_plant: PlantState | None = None
    owns_plant: bool = True

    def __post_init__(self) -> None:
        p, topo = self.params, self.topo
        cp = p.cooling
        self.cp: CoolingParams = cp
        self.pp: PowerChainParams = p.power
        d = self.design = self.run_design or design.derive(p)
        self.lf = d.liquid_fraction
        ones = np.ones(topo.chips)
        ones.setflags(write=False)  # the clock while nothing is capped or hot (shared)
        # The chips' fixed spread of power and cold-plate resistance, drawn once from the run's
        # own stream for it (``rng.chip_spread``: the other streams' draws are untouched).
        self.chips = capping.Chips.of(
            self.acc, cp, self.pp, topo, topo.us_row[topo.chip_us], ones, rng.chip_spread(p.seed)
        )
        # Design values, fixed for the run (``twin.physics.design``).
        self.racks = thermal.Racks(
            cp, self.lf, d, topo.us_row, np.full(topo.ultraservers, cp.supply_setpoint_c)
        )
        self.plant_design = plant.PlantDesign.of(cp, d, topo.ultraservers, self.racks.liquid_design_w)
        # State.
        self.clock = ones
        self._full_clock = True
        self.cap = capping.PowerCap.standing(
            self.pp, topo.rows, d.us_full_load_it_w, np.bincount(topo.us_row, minlength=topo.rows)
        )
        self.timeline = effects.Timeline()  # the timed effects (``twin.physics.effects``)
        self.row_flow_fraction = np.ones(topo.rows)  # 1 = CDU pumps healthy, 0 = lost
        self._cdu_flow_of: FloatArray | None = None  # the rows' fractions ``cdu_flow`` summed
        self._cdu_flow = 0.0
        self.plant: PlantState = self.shared_plant or PlantState.initial(cp)
        self.trips = thermal.Trips.none(topo.chip_us, topo.ultraservers)
        self._throttling = False
        self._last: capping.OperatingPoint | None = None  # the last step, as the clocks saw it
        self._ran: RanAt | None = None  # a campus hall's last step (``reclock_for_site_cap``)

    # ------------------------------------------------------------------ events
    def apply(self, ev: ScheduledEvent, t_s: int) -> tuple[str, str]:
        """Apply a facility event; returns (target, detail) for the events log. A timed event is an
        interval of its own (``twin.physics.effects``); an open-ended power cap replaces the standing cap
        of its target, a cap of 0 clears every cap there, ``cooling_restore`` ends every cooling
        fault."""
        end = t_s + ev.duration_s if ev.duration_s > 0 else -1
        timed = f" for {ev.duration_s} s" if end >= 0 else ""
        if ev.kind == "power_cap":
            return self._apply_cap(ev, t_s, end, timed)
        if ev.kind == "cdu_pump_failure":
            r = effects.row_index(self.topo.rows, ev.target or "0")
            frac = min(max(ev.value, 0.0), 1.0)
            self.timeline.add(effects.Effect(effects.CDU, r, frac, t_s, end))
            self._resolve(t_s)
            self._reclock_for_flow()
            return f"row:{r}", f"CDU pumps lost, flow {self.row_flow_fraction[r]:.0%}{timed}"
        if ev.kind in ("chiller_trip", "cooling_tower_loss"):
            return self._apply_plant_loss(ev, t_s, end, timed)
        # cooling_restore: every cooling fault ends now.
        self.timeline.end(lambda e: e.what in (effects.CDU, effects.CHILLERS, effects.TOWERS))
        self._resolve(t_s)
        return "plant", "cooling restored"

    def _apply_cap(self, ev: ScheduledEvent, t_s: int, end: int, timed: str) -> tuple[str, str]:
        target = ev.target or "facility"
        cap = effects.no_cap(ev.value)
        what = effects.FACILITY_CAP if target == "facility" else effects.ROW_CAP
        r = 0 if what == effects.FACILITY_CAP else effects.row_index(self.topo.rows, target)
        self.cap.event(self.timeline, what, r, cap, t_s, end)
        self._resolve(t_s)
        label = "facility" if what == effects.FACILITY_CAP else f"row:{r}"
        shown = "cleared" if math.isinf(cap) else f"{cap / 1e6:.3f} MW"
        return label, f"power cap {shown}{timed}"

    def _apply_plant_loss(self, ev: ScheduledEvent, t_s: int, end: int, timed: str) -> tuple[str, str]:
        cp, pl = self.cp, self.plant
        chiller = ev.kind == "chiller_trip"
        up = pl.chillers_up if chiller else pl.towers_up
        k = min(max(int(ev.value) if ev.value > 0 else 1, 1), up)
        if k > 0:
            self.timeline.add(effects.Effect(effects.CHILLERS if chiller else effects.TOWERS, 0, k, t_s, end))
        self._resolve(t_s)
        if chiller:
            return "plant", f"{k} chiller(s) tripped, {pl.chillers_up}/{cp.chiller_units} running{timed}"
        return "plant", f"{k} economizer unit(s) lost, {pl.towers_up}/{cp.economizer_units} left{timed}"

    def set_site_cap(self, cap_w: float) -> None:
        """The campus's share of its cap for this hall from the next clocks on (inf: none)."""
        self.cap.set_site(cap_w)

    def reclock_for_site_cap(self) -> None:
        """The campus moved this hall's share of its cap after the step: the next clocks are
        solved again from the step just run (its operating point, clocks and coolant) for the
        new share, so a hall whose share grew does not stay slowed for a step. Only while the
        cap binds or the clocks are below full: otherwise the next clocks are full either way."""
        op, ran = self._last, self._ran
        if op is None or ran is None:
            return
        if self._full_clock and self.cap.it_target_w(op.it_w, op.facility_w) >= op.it_w:
            return
        self._set_clock(
            capping.next_clock(self.chips, self.cap, ran.clock, ran.full_clock, op, ran.coolant_us, ran.r_us)
        )

    def _set_clock(self, clock: FloatArray) -> None:
        """The clocks for the next step."""
        self.clock = clock
        self._full_clock = clock is self.chips.ones or bool(clock.min() >= 1.0)

    def _resolve(self, t_s: int) -> None:
        """Caps, CDU flows and plant units from the standing caps and the active intervals."""
        cap = self.cap
        st = effects.resolve(
            self.timeline.effects,
            t_s,
            cap.standing_facility_w,
            cap.standing_row_w,
            self.cp.chiller_units,
            self.cp.economizer_units,
        )
        cap.resolved(st.facility_cap_w, st.row_cap_w)
        self.row_flow_fraction = st.row_flow_fraction
        if self.owns_plant:
            self.plant.chillers_up = st.chillers_up
            self.plant.towers_up = st.towers_up

    def _reclock_for_flow(self) -> None:
        """Flow changed between steps: the chips' thermal protection acts within milliseconds,
        so re-solve this step's clocks for the new cold-plate resistance at the loops' current
        temperatures (stagnant loops are one mixed volume)."""
        op = self._last
        if op is None or self.lf <= 0:
            return
        coolant, r_us = self.racks.coolant_now(op.speed, self.row_flow_fraction, self.plant.fw_supply_c)
        self._set_clock(
            capping.next_clock(self.chips, self.cap, self.clock, self._full_clock, op, coolant, r_us)
        )

    # ------------------------------------------------------------------ step
    def step_it(
        self,
        load: Load,
        t_s: int,
        dt_s: int,
        first: Conditions | None = None,
        share: capping.CapShare | None = None,
    ) -> ItStep:
        """The part of a step this facility's own chips decide: timed effects ending, chip and IT
        power at this step's clocks, the rack loops, junction protection and loop trips, from
        the chips' ``load`` (``twin.physics.load.Load``; 0 on unpowered chips). The plant and the power
        chain come after, once for the hall (``twin.compose.hall``), then ``finish_step``. ``first``: a
        run's first step's conditions, for the facility cap's first conversion to IT watts (no
        last step has measured the ratio of IT to facility power). ``share``: this pool's part
        of a cap its hall shares (``capping.CapShare``; None: a hall of one pool)."""
        if share is not None:
            self.cap.take(share)
        ev: Events = []
        if self.timeline.end_due(t_s, ev):
            self._resolve(t_s)
        clock = self.clock
        full_clock = self._full_clock
        # Dynamic power at full clock, (P_tdp - P_idle) u, only where a clock below 1 needs it.
        dyn_full = None if full_clock else self.chips.dynamic_w(load.util)
        th = self._power_and_heat(load, dyn_full, clock, full_clock, dt_s, first, ev)
        ret, coolant, flow_frac, shut, ret0 = th.ret, th.coolant, th.flow_frac, th.shut, th.ret0
        it_w, liquid_us = th.pw.it_w, th.liquid_us
        # Heat handed to the facility water over the step = heat in - heat stored in the loops
        # (negative when loops colder than their supply draw heat from the facility water).
        loops_stored_w = cooling.loop_stored_w(self.design.us_loop_mass_kg, ret, ret0, dt_s)
        liquid_w = float(np.add.reduce(liquid_us))  # = .sum(), without its Python wrapper
        to_fw_w = liquid_w - loops_stored_w
        self.racks.return_c = ret

        us_off = self.trips.us_tripped.copy()  # powered off during this step
        # The CRAHs' supply air the UltraServers' air-cooled parts breathe (warmer while the
        # chilled water stores heat).
        inlet_air_c = cooling.crah_supply_air_c(self.plant.chw_supply_c, self.cp)
        tripped_chips, recovered_chips = self.trips.loop_trips(
            self.cp, self.lf, ret, coolant, flow_frac, load, shut, t_s, ev, inlet_air_c
        )
        air_heat = it_w - liquid_w
        return ItStep(
            th,
            load,
            th.dyn_full,
            to_fw_w,
            air_heat,
            it_w,
            us_off,
            tripped_chips,
            recovered_chips,
            ev,
            loops_stored_w,
        )

    def finish_step(
        self,
        part: ItStep,
        plant_out: plant.PlantResult,
        losses: power.ChainLosses,
        facility_w: float,
        cond: Conditions,
        share: capping.CapShare | None = None,
    ) -> FacilityStep:
        """The step after the plant and the power chain: the clocks for the next step (power
        caps and thermal equilibrium; ``facility_w`` is the whole facility's power, which a
        facility cap is measured against; ``share`` as for ``step_it``) and the step's record."""
        if share is not None:
            self.cap.take(share)
        th, load = part.heat, part.load
        pw, clock, full_clock, coolant, r_us = th.pw, th.clock, th.full_clock, th.coolant, th.r_us
        # Clocks for the next step: power caps and thermal equilibrium.
        op = self._last = capping.OperatingPoint(load, part.dyn_full, pw.it_w, facility_w, pw.us_it, th.speed)
        if self.cap.site_w < math.inf:  # a campus shares its cap among its halls from these
            self.cap.basis = capping.basis(
                self, load, clock, full_clock, pw.it_w, pw.us_gact, self.chips.p_scale
            )
            self._ran = RanAt(self.clock, self._full_clock, coolant, r_us)
        self._set_clock(
            capping.next_clock(self.chips, self.cap, self.clock, self._full_clock, op, coolant, r_us)
        )
        throttled = 0 if full_clock else int(((clock < 0.999) & (load.util > 0)).sum())
        if (throttled > 0) != self._throttling:
            self._throttling = throttled > 0
            part.events.append(
                ("throttle", "factory", f"{throttled} chips throttled" if throttled else "throttling ended")
            )
        fw_supply_c = self.plant.fw_supply_c
        # The CDUs' secondary supply at the same instant (the end of the step): never colder than
        # the facility water that cools it plus the CDU approach (``cooling.loop_supply_c``).
        sec_supply_c = cooling.loop_supply_c(fw_supply_c, self.cp)
        return steps.record(
            part,
            plant_out,
            losses,
            fw_supply_c,
            sec_supply_c,
            self.cap.facility_w,
            throttled,
            cond,
            self.chips.r_scale,
        )

    def _power_and_heat(
        self,
        load: Load,
        dyn_full: FloatArray | None,
        clock: FloatArray,
        full_clock: bool,
        dt_s: int,
        first: Conditions | None,
        ev: Events,
    ) -> Heat:
        """Chip and IT power at this step's clocks, the rack loops over the step, and junction
        protection inside the step (re-solved once at the protected clocks)."""
        pw = self._it_power(load, dyn_full, clock, full_clock)
        # Power caps inside the step: the clocks were set for the last step's load; when this
        # step's load at those clocks draws more than a cap allows, the chips slow down now
        # (power capping acts within milliseconds to seconds, well inside a step).
        reclocked = False
        if self.cap.capped:
            # A run's first step converts the facility cap at this step's own ratio of IT to
            # facility power, asked of the plant and the chain (``first``: its conditions).
            ratio = None
            if first is not None:
                d, flow = self.plant_design, self.cdu_flow()
                ratio = partial(
                    plant.it_per_facility_w,
                    d,
                    self.plant,
                    flow,
                    pw.it_w,
                    first,
                    dt_s,
                    self.design.ups_rating_w,
                    self.pp,
                )
            it_target = self.cap.in_step_it_target_w(self._last, ratio)
            capped = capping.within_step(
                self.chips, self.cap, clock, full_clock, load, dyn_full, pw.it_w, pw.us_it, it_target
            )
            if capped is not None:
                reclocked = True
                (clock, dyn_full), full_clock = capped, False
                pw = self._it_power(load, dyn_full, clock, full_clock)

        pl = self.plant
        th = self.racks.step(pw, clock, full_clock, dyn_full, reclocked, self.row_flow_fraction, pl, dt_s)
        if float(th.us_tj_max.max()) > self.cp.throttle_temp_c:
            self._protect_in_step(th, load, dt_s, ev)
        if th.protected:
            # The clocks the chips ran at: the next clocks are solved from this operating point.
            self.clock, self._full_clock = th.clock, False
        return th

    def _protect_in_step(self, th: Heat, load: Load, dt_s: int, ev: Events) -> None:
        """Junction protection inside the step: a chip above its throttle curve slows down at
        once (the package settles in seconds, well inside a step); one that is past its
        shutdown temperature even at the lowest thermal clock powers its UltraServer off. The
        step is then solved again at the protected clocks with the same pump speed, so its
        coolant can only be cooler and no powered chip ends the step above its limits."""
        cu = self.topo.chip_us
        dyn_full = th.dyn_full
        if dyn_full is None:
            dyn_full = th.dyn_full = self.chips.dynamic_w(load.util)
        ch = self.chips
        tj = cooling.junction_c(th.coolant[cu], th.r_us[cu] * ch.r_scale, th.pw.chip_p)
        prot = thermal.protect(self.cp, ch, cu, tj, th.clock, th.pw.chip_p > 0, dyn_full, th.coolant, th.r_us)
        if prot is None:
            return
        th.protected = True
        th.clock, th.shut = prot
        self.trips.shutdown(th.shut, load.alive, self.cp.shutdown_temp_c, ev)
        th.full_clock = False
        th.pw = self._it_power(load, dyn_full, th.clock, False)
        th.liquid_us = self.lf * th.pw.us_it
        sec_supply = cooling.loop_supply_c(self.plant.fw_supply_c, self.cp)
        th.ret, th.coolant = self.racks.run(
            th.liquid_us, th.m, sec_supply, self.plant.chw_supply_c, th.ret0, dt_s
        )
        th.us_tj_max = cooling.junction_c(th.coolant, th.r_us, th.pw.us_chip_max_w)

    def cdu_flow(self) -> float:
        """The loops' summed CDU flow fraction (``plant.cdu_flow``), summed again only when the
        rows' flows are replaced (a CDU fault began or ended)."""
        rff = self.row_flow_fraction
        if rff is not self._cdu_flow_of:
            self._cdu_flow_of, self._cdu_flow = rff, plant.cdu_flow(self.plant_design, rff, self.topo.us_row)
        return self._cdu_flow

    def _it_power(
        self, load: Load, dyn_full: FloatArray | None, clock: FloatArray, full_clock: bool
    ) -> ItPower:
        """Chip, host and switch power at ``clock`` (``twin.physics.itpower.it_power``)."""
        return it_power(self.chips, self.sys, self.trips.us_tripped, load, dyn_full, clock, full_clock)
