"""The facility: chip clocks and power, the power chain with capping, and the cooling plant.

``Facility.step`` turns per-chip utilisation into power, heat, temperatures and plant power for one
step, and decides the chips' clocks for the next step (power capping and thermal throttling), so
that the power drawn and the work done in a step always use the same clock.

Heat path (liquid-cooled systems): cold plates -> each UltraServer's rack loop (thermal mass,
variable-speed flow) -> its row's CDU -> the facility water loop (thermal mass) -> economizer
(cooling towers with a plate heat exchanger, or dry coolers) with chiller trim. The air share goes
to CRAHs on chilled water from the same chillers. Every loop uses the exact solution of
C dT/dt = Q - m c_p (T - T_in) for piecewise-constant inputs, stable at any step size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin import capping, cooling, design, effects, plant, power
from twin.catalog import Accelerator, System
from twin.events import Events
from twin.params import CoolingParams, FactoryParams, PowerChainParams, ScheduledEvent
from twin.plant import MIN_FLOW, UNIT_COLUMNS
from twin.site import Conditions
from twin.topology import Topology

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

CP = cooling.WATER_CP_J_KG_K
RHO = cooling.WATER_RHO_KG_M3

EVENT_KINDS = ("power_cap", "cdu_pump_failure", "chiller_trip", "cooling_tower_loss", "cooling_restore")


@dataclass(slots=True)
class ItPower:
    """IT power of a step. Per-chip power is needed only by chip samples, junction protection,
    the live view and the services' share: at full clock it is derived from the utilisation when
    first asked (``chip_p``, ``chip_p_at``), not computed every step."""

    full_p: FloatArray | None  # per chip [W], or None: P_idle + (P_tdp - P_idle) u on demand
    act_chip: FloatArray  # work rate per chip = utilisation x clock [-]
    us_it: FloatArray  # per UltraServer at rack input [W]
    it_w: float
    psu_loss_w: float
    us_chip_w: FloatArray  # chip power per UltraServer [W]
    us_chip_max_w: FloatArray  # hottest-running chip's power per UltraServer [W]
    us_act: FloatArray  # summed work rate of each UltraServer's chips [-]
    idle_w: float = 0.0
    dyn_w: float = 0.0  # P_tdp - P_idle
    dead: npt.NDArray[np.intp] | None = None  # unpowered chips (utilisation 0 there)

    @property
    def chip_p(self) -> FloatArray:
        """Power of every chip [W] (``power.chip_power_w``; 0 on unpowered chips)."""
        if self.full_p is None:
            p = self.act_chip * self.dyn_w  # full clock: the work rate is the utilisation
            p += self.idle_w
            if self.dead is not None and len(self.dead):
                p[self.dead] = 0.0
            self.full_p = p
        return self.full_p

    def chip_p_at(self, chips: npt.NDArray[np.int64]) -> FloatArray:
        """Power of ``chips`` [W], without the whole per-chip array where it is not built yet
        (``chips`` held by jobs: powered, so never among the unpowered)."""
        if self.full_p is not None:
            out: FloatArray = self.full_p[chips]
            return out
        return self.idle_w + self.dyn_w * self.act_chip[chips]


@dataclass(slots=True)
class _Heat:
    """Power and heat of a step after junction protection (``Facility._power_and_heat``)."""

    pw: ItPower
    clock: FloatArray
    full_clock: bool
    ret: FloatArray  # rack loop return [°C]
    coolant: FloatArray  # what the cold plates see [°C]
    r_us: FloatArray  # junction-to-coolant resistance [K/W]
    us_tj_max: FloatArray  # hottest junction per UltraServer [°C]
    speed: FloatArray  # rack loop pump speed [-]
    flow_frac: FloatArray  # CDU pump health per UltraServer [-]
    shut: npt.NDArray[np.int64]  # UltraServers shut down by their junctions this step
    ret0: FloatArray  # rack loop return at the start of the step [°C]
    protected: bool  # clocks lowered inside the step (a power cap or junction protection)


@dataclass(slots=True)
class ItStep:
    """What a facility's own chips did in a step, before the plant and the power chain
    (``Facility.step_it``)."""

    heat: _Heat
    util: FloatArray  # utilisation at full clock, 0 on unpowered chips [-]
    alive: BoolArray
    dyn_full: FloatArray | None
    to_fw_w: float  # heat handed to the facility water over the step [W]
    air_heat_w: float  # heat into the room air [W]
    it_w: float
    us_off: BoolArray
    tripped_chips: npt.NDArray[np.int64]
    recovered_chips: npt.NDArray[np.int64]
    events: Events


@dataclass
class PlantState:
    chillers_up: int
    towers_up: int
    fw_supply_c: float  # facility water supply to the CDUs
    chw_supply_c: float  # chilled water supply to the CRAHs


@dataclass(frozen=True)
class FacilityStep:
    """Everything the record needs from one physics step. Per-UltraServer sums and maxima come
    with the step; per-chip junction temperatures are derived on demand (``chip_tj``) from the
    UltraServer's coolant and resistance, since only sampled steps and the live view read them."""

    act_chip: FloatArray  # work rate per chip = utilisation x clock [-]
    pw: ItPower  # its chip power on demand (``chip_p``, ``chip_p_at``)
    clock: FloatArray  # clock the chips ran at this step [-]
    full_clock: bool  # every chip ran at full clock (``clock`` is all ones)
    us_it: FloatArray
    us_return_c: FloatArray
    us_chip_w: FloatArray  # chip power per UltraServer [W]
    us_act: FloatArray  # summed work rate per UltraServer [-]
    us_tj_max: FloatArray  # hottest junction per UltraServer [°C]
    us_coolant_c: FloatArray  # coolant the cold plates saw [°C]
    us_r_k_per_w: FloatArray  # junction-to-coolant resistance [K/W]
    chip_us: npt.NDArray[np.int32]
    it_w: float
    chip_w: float
    psu_loss_w: float
    pdu_loss_w: float
    ups_loss_w: float
    transformer_loss_w: float
    chiller_w: float
    pumps_w: float
    fans_w: float
    free_fraction: float
    cop: float
    water_l: float
    fw_supply_c: float
    unmet_heat_w: float
    facility_cap_w: float
    units: dict[str, float]  # the plant's units (``plant.UNIT_COLUMNS``)
    throttled_chips: int
    protected: bool  # a power cap or junction protection lowered clocks inside this step
    cond: Conditions
    us_off: BoolArray  # UltraServers powered off by thermal protection during this step
    tripped_chips: npt.NDArray[np.int64]  # chips that went offline this step (thermal trip)
    recovered_chips: npt.NDArray[np.int64]  # chips back after a thermal trip
    events: Events  # what the physics reported this step (trips, throttling, effects ending)

    @property
    def chip_p(self) -> FloatArray:
        """Power of every chip [W]."""
        return self.pw.chip_p

    def chip_tj(self) -> FloatArray:
        """Junction temperature of every chip [°C] (``cooling.junction_c``)."""
        u = self.chip_us
        return cooling.junction_c(self.us_coolant_c[u], self.us_r_k_per_w[u], self.chip_p)

    @property
    def cooling_w(self) -> float:
        return self.chiller_w + self.pumps_w + self.fans_w

    @property
    def loss_w(self) -> float:
        return self.pdu_loss_w + self.ups_loss_w + self.transformer_loss_w

    @property
    def facility_w(self) -> float:
        return self.it_w + self.cooling_w + self.loss_w

    @property
    def pue(self) -> float:
        """Facility / IT power; undefined (NaN) while every system is powered off."""
        return self.facility_w / self.it_w if self.it_w > 0 else math.nan


@dataclass
class Facility:
    params: FactoryParams
    topo: Topology
    sys: System
    acc: Accelerator
    run_design: design.Design | None = None  # the run's Design (derived here when not given)

    def __post_init__(self) -> None:
        p, topo = self.params, self.topo
        cp = p.cooling
        self.cp: CoolingParams = cp
        self.pp: PowerChainParams = p.power
        n, nus, rows = topo.chips, topo.ultraservers, topo.rows
        self.chip_row = topo.us_row[topo.chip_us]
        d = self.design = self.run_design or design.derive(p)
        self.plate_r = d.cold_plate_r_k_per_w
        self.air_r = d.air_r_k_per_w
        self.lf = d.liquid_fraction
        # Design values, fixed for the run (``twin.design``).
        self.us_design_it_w = d.us_full_load_dc_w
        self.design_it_w = d.design_it_w
        self.ups_rating_w = d.ups_rating_w
        self.us_design_liquid_w = max(self.lf * self.us_design_it_w, 1.0)
        self.us_flow_design = d.us_design_flow_kg_s
        self.us_mass_kg = d.us_loop_mass_kg
        self.design_liquid_w = nus * self.us_design_liquid_w
        self.fw_flow_design = d.facility_design_flow_kg_s
        self.fw_mass_kg = d.facility_loop_mass_kg
        design_heat = self.design_it_w  # all IT power becomes heat
        self.chiller_unit_w = d.chiller_unit_w
        eff_units = max(cp.economizer_units - cp.economizer_redundancy, 1)
        self.econ_unit_effectiveness = cp.economizer_effectiveness / eff_units
        # Pumps and fans at design flow / full speed (affinity laws scale them from here).
        self.cdu_pump_design_w = cp.pump_head_pa * (self.us_flow_design / RHO) / cp.pump_efficiency
        self.fw_pump_design_w = cp.pump_head_pa * (self.fw_flow_design / RHO) / cp.pump_efficiency
        self.fan_design_w = cp.drycooler_fan_w_per_w * design_heat
        # State.
        self._ones = np.ones(n)
        self._ones.setflags(write=False)  # the clock while nothing is capped or hot (shared)
        self.clock = self._ones
        self._full_clock = True
        self.us_return_c = np.full(nus, cp.supply_setpoint_c)
        # Standing caps ([power] or an open-ended power_cap event) and the timed effects on top
        # of them (``twin.effects``); the values below are resolved from both.
        self.standing_facility_cap_w = effects.no_cap(self.pp.facility_cap_w)
        self.standing_row_cap_w = np.full(rows, effects.no_cap(self.pp.row_cap_w))
        self.effects: list[effects.Effect] = []
        self.row_flow_fraction = np.ones(rows)  # 1 = CDU pumps healthy, 0 = lost
        self.row_cap_w = self.standing_row_cap_w.copy()
        self._rows_capped = bool(np.isfinite(self.row_cap_w).any())
        self.facility_cap_w = self.standing_facility_cap_w
        # A campus's share of its cap for this hall (``twin.campus``; inf: none). The cap in force
        # is the lower of it and the hall's own (standing or timed).
        self.site_cap_w = math.inf
        self._own_cap_w = self.standing_facility_cap_w
        # When this facility shares a cap with others (``capping.shared_targets``): its IT target
        # over the proportional one (1: alone under its cap), and its last step's basis for it.
        self.cap_it_scale = 1.0
        self.cap_basis = (0.0, 0.0, 0.0)
        self._first: tuple[Conditions, int] | None = None  # a first step's conditions (``step``)
        # A campus hall's last step as its next clocks were solved from it: (clocks it ran at,
        # all full, coolant, cold-plate resistance) (``reclock_for_site_cap``).
        self._ran: tuple[FloatArray, bool, FloatArray, FloatArray] | None = None
        self.plant = PlantState(
            chillers_up=cp.chiller_units,
            towers_up=cp.economizer_units,
            fw_supply_c=self.fw_setpoint_c,
            chw_supply_c=cp.chilled_water_c,
        )
        # False for the second and later systems of a mixed floor: the plant (shared) is the
        # first system's, and the plant's faults are its effects (``twin.floor``).
        self.owns_plant = True
        self.us_tripped = np.zeros(nus, dtype=bool)
        self.chip_tripped = np.zeros(n, dtype=bool)
        self.us_hold_until = np.zeros(nus, dtype=np.int64)  # junction shutdown: off at least until
        self._throttling = False
        self._last: (
            tuple[FloatArray, BoolArray, FloatArray | None, float, float, FloatArray, FloatArray] | None
        ) = None

    @property
    def fw_setpoint_c(self) -> float:
        return self.cp.supply_setpoint_c - self.cp.cdu_approach_k

    # ------------------------------------------------------------------ events
    def apply(self, ev: ScheduledEvent, t_s: int) -> tuple[str, str]:
        """Apply a facility event; returns (target, detail) for the events log. A timed event is an
        interval of its own (``twin.effects``); an open-ended power cap replaces the standing cap
        of its target, a cap of 0 clears every cap there, ``cooling_restore`` ends every cooling
        fault."""
        cp = self.cp
        end = t_s + ev.duration_s if ev.duration_s > 0 else -1
        timed = f" for {ev.duration_s} s" if end >= 0 else ""
        if ev.kind == "power_cap":
            target = ev.target or "facility"
            cap = effects.no_cap(ev.value)
            what = effects.FACILITY_CAP if target == "facility" else effects.ROW_CAP
            r = 0 if what == effects.FACILITY_CAP else self._row(target)
            if math.isinf(cap):
                self._end_effects(lambda e: e.what == what and e.index == r)
                self._set_standing(what, r, math.inf)
            elif end < 0:
                self._set_standing(what, r, cap)
            else:
                self.effects.append(effects.Effect(what, r, cap, t_s, end))
            self._resolve(t_s)
            label = "facility" if what == effects.FACILITY_CAP else f"row:{r}"
            shown = "cleared" if math.isinf(cap) else f"{cap / 1e6:.3f} MW"
            return label, f"power cap {shown}{timed}"
        if ev.kind == "cdu_pump_failure":
            r = self._row(ev.target or "0")
            frac = min(max(ev.value, 0.0), 1.0)
            self.effects.append(effects.Effect(effects.CDU, r, frac, t_s, end))
            self._resolve(t_s)
            self._reclock_for_flow()
            return f"row:{r}", f"CDU pumps lost, flow {self.row_flow_fraction[r]:.0%}{timed}"
        if ev.kind in ("chiller_trip", "cooling_tower_loss"):
            chiller = ev.kind == "chiller_trip"
            up = self.plant.chillers_up if chiller else self.plant.towers_up
            k = min(max(int(ev.value) if ev.value > 0 else 1, 1), up)
            self.effects.append(
                effects.Effect(effects.CHILLERS if chiller else effects.TOWERS, 0, k, t_s, end)
            )
            self._resolve(t_s)
            if chiller:
                return (
                    "plant",
                    f"{k} chiller(s) tripped, {self.plant.chillers_up}/{cp.chiller_units} running{timed}",
                )
            return (
                "plant",
                f"{k} economizer unit(s) lost, {self.plant.towers_up}/{cp.economizer_units} left{timed}",
            )
        # cooling_restore: every cooling fault ends now.
        self._end_effects(lambda e: e.what in (effects.CDU, effects.CHILLERS, effects.TOWERS))
        self._resolve(t_s)
        return "plant", "cooling restored"

    def set_site_cap(self, cap_w: float) -> None:
        """The campus's share of its cap for this hall from the next clocks on (inf: none)."""
        self.site_cap_w = cap_w
        self.facility_cap_w = min(self._own_cap_w, cap_w)

    def reclock_for_site_cap(self) -> None:
        """The campus moved this hall's share of its cap after the step: the next clocks are
        solved again from the step just run (its operating point, clocks and coolant) for the
        new share, so a hall whose share grew does not stay slowed for a step. Only while the
        cap binds or the clocks are below full: otherwise the next clocks are full either way."""
        if self._last is None or self._ran is None:
            return
        util, alive, dyn_full, it_w, facility_w, us_it, _ = self._last
        if self._full_clock and capping.it_target_w(self, it_w, facility_w) >= it_w:
            return
        ran_clock, ran_full, coolant, r_us = self._ran
        self.clock, self._full_clock = ran_clock, ran_full
        self.clock = self._next_clock(util, alive, dyn_full, it_w, facility_w, us_it, coolant, r_us)
        self._full_clock = self.clock is self._ones or bool(self.clock.min() >= 1.0)

    def _set_standing(self, what: str, r: int, cap: float) -> None:
        if what == effects.FACILITY_CAP:
            self.standing_facility_cap_w = cap
        else:
            self.standing_row_cap_w[r] = cap

    def _end_effects(self, pred: Callable[[effects.Effect], bool]) -> None:
        self.effects = [e for e in self.effects if not pred(e)]

    def _resolve(self, t_s: int) -> None:
        """Caps, CDU flows and plant units from the standing caps and the active intervals."""
        st = effects.resolve(
            self.effects,
            t_s,
            self.standing_facility_cap_w,
            self.standing_row_cap_w,
            self.cp.chiller_units,
            self.cp.economizer_units,
        )
        self._own_cap_w = st.facility_cap_w
        self.facility_cap_w = min(st.facility_cap_w, self.site_cap_w)
        self.row_cap_w = st.row_cap_w
        self._rows_capped = bool(np.isfinite(self.row_cap_w).any())
        self.row_flow_fraction = st.row_flow_fraction
        if self.owns_plant:
            self.plant.chillers_up = st.chillers_up
            self.plant.towers_up = st.towers_up

    def _reclock_for_flow(self) -> None:
        """Flow changed between steps: the chips' thermal protection acts within milliseconds,
        so re-solve this step's clocks for the new cold-plate resistance at the loops' current
        temperatures (stagnant loops are one mixed volume)."""
        if self._last is None or self.lf <= 0:
            return
        util, alive, dyn_full, it_w, facility_w, us_it, speed = self._last
        flow_frac = self.row_flow_fraction[self.topo.us_row]
        new_speed = speed * flow_frac
        sec = self.plant.fw_supply_c + self.cp.cdu_approach_k
        coolant = np.where(new_speed > 0, 0.5 * (sec + self.us_return_c), self.us_return_c)
        self.clock = self._next_clock(
            util, alive, dyn_full, it_w, facility_w, us_it, coolant, self._cold_plate_r(flow_frac)
        )
        self._full_clock = self.clock is self._ones or bool(self.clock.min() >= 1.0)

    def _row(self, target: str) -> int:
        t = target.split(":", 1)[1] if ":" in target else target
        r = int(t)
        if not 0 <= r < self.topo.rows:
            raise ValueError(f"row {r} out of range 0..{self.topo.rows - 1}")
        return r

    def _end_due(self, t_s: int, ev: Events) -> None:
        """Intervals that end at or before ``t_s`` end (each only itself); the state is resolved
        again from those still active."""
        if not self.effects or not any(0 <= e.end_s <= t_s for e in self.effects):
            return
        keep = []
        for e in self.effects:
            if not 0 <= e.end_s <= t_s:
                keep.append(e)
            elif e.what == effects.FACILITY_CAP:
                ev.append(("power_cap", "facility", f"power cap {e.value / 1e6:.3f} MW ended"))
            elif e.what == effects.ROW_CAP:
                ev.append(("power_cap", f"row:{e.index}", f"power cap {e.value / 1e6:.3f} MW ended"))
            elif e.what == effects.CDU:
                ev.append(("cooling_restore", f"row:{e.index}", "CDU pump failure ended"))
            elif e.what == effects.CHILLERS:
                ev.append(("cooling_restore", "plant", f"{int(e.value)} chiller(s) back"))
            else:
                ev.append(("cooling_restore", "plant", f"{int(e.value)} economizer unit(s) back"))
        self.effects = keep
        self._resolve(t_s)

    # ------------------------------------------------------------------ step
    def step(self, util: FloatArray, alive: BoolArray, cond: Conditions, t_s: int, dt_s: int) -> FacilityStep:
        """One step. ``util`` is each chip's utilisation at full clock (0 idle), ``alive`` marks
        chips that are powered."""
        # The first step has no last step to convert a facility cap into IT watts with: it is
        # converted at the plant's and the chain's answer to this step's IT power instead.
        self._first = (cond, dt_s) if self._last is None else None
        part = self.step_it(util, alive, t_s, dt_s)
        self._first = None
        # Plant: air side first (CRAHs on chilled water), then the liquid loop.
        plant_out = self._plant(part.to_fw_w, part.air_heat_w, cond, dt_s)
        # Power chain.
        cooling_w = plant_out["chiller_w"] + plant_out["pumps_w"] + plant_out["fans_w"]
        losses = power.chain_losses(part.it_w, cooling_w, self.ups_rating_w, self.pp)
        facility_w = part.it_w + cooling_w + losses.total_w
        return self.finish_step(part, plant_out, losses, facility_w, cond)

    def step_it(self, util: FloatArray, alive: BoolArray, t_s: int, dt_s: int) -> ItStep:
        """The part of a step this facility's own chips decide: timed effects ending, chip and IT
        power at this step's clocks, the rack loops, junction protection and loop trips. The
        plant and the power chain come after (``step``; on a mixed floor once for all systems,
        ``twin.floor``)."""
        ev: Events = []
        self._end_due(t_s, ev)
        clock = self.clock
        # Unpowered chips are few (failures, trips): handled by index, not by whole-array masks.
        dead = np.zeros(0, dtype=np.intp) if alive.all() else np.flatnonzero(~alive)
        if len(dead):
            util = util.copy()
            util[dead] = 0.0
        full_clock = self._full_clock
        # Dynamic power at full clock, (P_tdp - P_idle) u, only where a clock below 1 needs it.
        dyn_full = None if full_clock else (self.acc.tdp_w - self.acc.idle_w) * util
        th = self._power_and_heat(util, alive, dead, dyn_full, clock, full_clock, dt_s, ev)
        ret, coolant, flow_frac, shut, ret0 = th.ret, th.coolant, th.flow_frac, th.shut, th.ret0
        us_it, it_w = th.pw.us_it, th.pw.it_w
        liquid_us = self.lf * us_it
        # Heat handed to the facility water over the step = heat in - heat stored in the loops.
        stored = self.us_mass_kg * CP * (ret - ret0)
        to_fw_w = max(float(liquid_us.sum() - stored.sum() / dt_s), 0.0)
        self.us_return_c = ret

        us_off = self.us_tripped.copy()  # powered off during this step
        tripped_chips, recovered_chips = self._loop_trips(ret, coolant, flow_frac, alive, shut, t_s, ev)
        air_heat = it_w - float(liquid_us.sum())
        return ItStep(
            th, util, alive, dyn_full, to_fw_w, air_heat, it_w, us_off, tripped_chips, recovered_chips, ev
        )

    def finish_step(
        self,
        part: ItStep,
        plant_out: dict[str, float],
        losses: power.ChainLosses,
        facility_w: float,
        cond: Conditions,
    ) -> FacilityStep:
        """The step after the plant and the power chain: the clocks for the next step (power
        caps and thermal equilibrium; ``facility_w`` is the whole facility's power, which a
        facility cap is measured against) and the step's record."""
        th, util, alive, dyn_full, ev = part.heat, part.util, part.alive, part.dyn_full, part.events
        pw, clock, full_clock, coolant, r_us = th.pw, th.clock, th.full_clock, th.coolant, th.r_us
        it_w, us_it = pw.it_w, pw.us_it
        # Clocks for the next step: power caps and thermal equilibrium.
        self._last = (util, alive, dyn_full, it_w, facility_w, us_it, th.speed)
        if self.site_cap_w < math.inf:  # a campus shares its cap among its halls from these
            self.cap_basis = capping.basis(self, util, clock, full_clock, it_w, pw.us_act)
            self._ran = (self.clock, self._full_clock, coolant, r_us)
        self.clock = self._next_clock(util, alive, dyn_full, it_w, facility_w, us_it, coolant, r_us)
        self._full_clock = self.clock is self._ones or bool(self.clock.min() >= 1.0)
        throttled = 0 if full_clock else int(((clock < 0.999) & (util > 0)).sum())
        if (throttled > 0) != self._throttling:
            self._throttling = throttled > 0
            ev.append(
                ("throttle", "factory", f"{throttled} chips throttled" if throttled else "throttling ended")
            )
        return FacilityStep(
            act_chip=pw.act_chip,
            pw=pw,
            clock=clock,
            full_clock=full_clock,
            protected=th.protected,
            us_it=us_it,
            us_return_c=th.ret,
            us_chip_w=pw.us_chip_w,
            us_act=pw.us_act,
            us_tj_max=th.us_tj_max,
            us_coolant_c=coolant,
            us_r_k_per_w=r_us,
            chip_us=self.topo.chip_us,
            it_w=it_w,
            chip_w=float(pw.us_chip_w.sum()),
            psu_loss_w=pw.psu_loss_w,
            pdu_loss_w=losses.pdu_w,
            ups_loss_w=losses.ups_w,
            transformer_loss_w=losses.transformer_w,
            chiller_w=plant_out["chiller_w"],
            pumps_w=plant_out["pumps_w"],
            fans_w=plant_out["fans_w"],
            free_fraction=plant_out["free_fraction"],
            cop=plant_out["cop"],
            water_l=plant_out["water_l"],
            fw_supply_c=self.plant.fw_supply_c,
            unmet_heat_w=plant_out["unmet_w"],
            facility_cap_w=self.facility_cap_w,
            units={k: plant_out[k] for k in UNIT_COLUMNS},
            throttled_chips=throttled,
            cond=cond,
            us_off=part.us_off,
            tripped_chips=part.tripped_chips,
            recovered_chips=part.recovered_chips,
            events=ev,
        )

    def _power_and_heat(
        self,
        util: FloatArray,
        alive: BoolArray,
        dead: npt.NDArray[np.intp],
        dyn_full: FloatArray | None,
        clock: FloatArray,
        full_clock: bool,
        dt_s: int,
        ev: Events,
    ) -> _Heat:
        """Chip and IT power at this step's clocks, the rack loops over the step, and junction
        protection inside the step (re-solved once at the protected clocks)."""
        topo, cp = self.topo, self.cp
        pw = self._it_power(util, alive, dead, dyn_full, clock, full_clock)
        # Power caps inside the step: the clocks were set for the last step's load; when this
        # step's load at those clocks draws more than a cap allows, the chips slow down now
        # (power capping acts within milliseconds to seconds, well inside a step).
        reclocked = False
        if math.isfinite(self.facility_cap_w) or self._rows_capped:
            capped = capping.within_step(self, util, dyn_full, pw.it_w, pw.us_it)
            if capped is not None:
                reclocked = True
                (clock, dyn_full), full_clock = capped, False
                pw = self._it_power(util, alive, dead, dyn_full, clock, full_clock)

        # Rack loops: variable-speed flow holds the design temperature rise; a row whose CDU pumps
        # are lost has no flow and its loops store the heat. The pumps' speed is set from the
        # load at this step's clock and held for the step.
        sec_supply = self.plant.fw_supply_c + cp.cdu_approach_k
        flow_frac = self.row_flow_fraction[topo.us_row]
        speed = np.clip(self.lf * pw.us_it / self.us_design_liquid_w, MIN_FLOW, 1.0) * flow_frac
        m = self.us_flow_design * speed
        ret0 = self.us_return_c
        ret, coolant = self._rack_loops(self.lf * pw.us_it, m, sec_supply, ret0, dt_s)
        r_us = self._cold_plate_r(flow_frac) if self.lf > 0 else np.full(topo.ultraservers, self.air_r)
        # The hottest junction of an UltraServer is its highest-power chip's (one coolant, one
        # resistance per UltraServer): per-chip temperatures are needed only when that is hot.
        us_tj_max = cooling.junction_c(coolant, r_us, pw.us_chip_max_w)

        # Junction protection inside the step: a chip above its throttle curve slows down at
        # once (the package settles in seconds, well inside a step); one that is past its
        # shutdown temperature even at the lowest thermal clock powers its UltraServer off. The
        # step is then solved again at the protected clocks with the same pump speed, so its
        # coolant can only be cooler and no powered chip ends the step above its limits.
        shut = np.zeros(0, dtype=np.int64)
        protected = False
        if float(us_tj_max.max()) > cp.throttle_temp_c:
            if dyn_full is None:
                dyn_full = (self.acc.tdp_w - self.acc.idle_w) * util
            tj = cooling.junction_c(coolant[topo.chip_us], r_us[topo.chip_us], pw.chip_p)
            prot = self._protect(tj, clock, util, dyn_full, coolant, r_us)
            if prot is not None:
                protected = True
                clock, shut = prot
                self._shutdown(shut, alive, ev)
                full_clock = False
                pw = self._it_power(util, alive, dead, dyn_full, clock, full_clock)
                ret, coolant = self._rack_loops(self.lf * pw.us_it, m, sec_supply, ret0, dt_s)
                us_tj_max = cooling.junction_c(coolant, r_us, pw.us_chip_max_w)
        if reclocked or protected:
            # The clocks the chips ran at: the next clocks are solved from this operating point.
            self.clock, self._full_clock = clock, False
        protected = protected or reclocked
        return _Heat(
            pw, clock, full_clock, ret, coolant, r_us, us_tj_max, speed, flow_frac, shut, ret0, protected
        )

    def _shutdown(self, shut: npt.NDArray[np.int64], alive: BoolArray, ev: Events) -> None:
        """UltraServers whose junctions cannot be held even at the lowest clock power off now."""
        if not len(shut):
            return
        self.us_tripped[shut] = True
        self.chip_tripped |= np.isin(self.topo.chip_us, shut) & alive
        limit = self.cp.shutdown_temp_c
        for us in shut.tolist():
            ev.append(
                (
                    "thermal_shutdown",
                    f"ultraserver:{us}",
                    f"junction above {limit:.0f} °C at the lowest clock: powered off",
                )
            )

    def _loop_trips(
        self,
        ret: FloatArray,
        coolant: FloatArray,
        flow_frac: FloatArray,
        alive: BoolArray,
        shut: npt.NDArray[np.int64],
        t_s: int,
        ev: Events,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Loop protection at the end of the step: an UltraServer whose coolant runs past its
        trip point powers off (chips, hosts, switches) and comes back once its coolant has
        cooled and its CDU runs again (one shut down by its junctions not before its hold
        time). Returns (chips going off, chips coming back)."""
        cp, topo = self.cp, self.topo
        if self.lf > 0:
            hot_us = ret > cp.loop_trip_c
            cool_us = (ret < cp.loop_restart_c) & (flow_frac > 0)
        else:
            hot_us = coolant > cp.air_trip_c
            cool_us = coolant < cp.air_restart_c
        newly = hot_us & ~self.us_tripped
        back = cool_us & self.us_tripped & (self.us_hold_until <= t_s)
        tripped_chips = recovered_chips = np.zeros(0, dtype=np.int64)
        if newly.any():
            self.us_tripped |= newly
            mask = newly[topo.chip_us] & alive
            self.chip_tripped |= mask
            tripped_chips = np.flatnonzero(mask)
            for u in np.flatnonzero(newly).tolist():
                ev.append(("thermal_trip", f"ultraserver:{u}", f"coolant {coolant[u]:.1f} °C: powered off"))
        if len(shut):
            tripped_chips = np.union1d(tripped_chips, np.flatnonzero(np.isin(topo.chip_us, shut) & alive))
            self.us_hold_until[shut] = t_s + cp.shutdown_restart_s
            back[shut] = False
        if back.any():
            self.us_tripped &= ~back
            mask = back[topo.chip_us] & self.chip_tripped
            self.chip_tripped &= ~mask
            recovered_chips = np.flatnonzero(mask)
            for u in np.flatnonzero(back).tolist():
                ev.append(("thermal_recover", f"ultraserver:{u}", f"coolant {coolant[u]:.1f} °C: back on"))
        return tripped_chips, recovered_chips

    def _it_power(
        self,
        util: FloatArray,
        alive: BoolArray,
        dead: npt.NDArray[np.intp],
        dyn_full: FloatArray | None,
        clock: FloatArray,
        full_clock: bool,
    ) -> ItPower:
        """Chip, host and switch power at ``clock``; rectifier losses are IT. Hosts follow their
        chips' work rate; switches are constant; a tripped UltraServer draws nothing.

        At full clock (the common step) chip power is P_idle + (P_tdp - P_idle) u
        (``power.chip_power_w`` at f = 1): the UltraServer sums and maxima follow from the chips'
        utilisation sums and maxima (``util`` is 0 on unpowered chips, ``dead``, few), and the
        per-chip array is built only when asked for (``ItPower.chip_p``)."""
        topo, acc, sysm = self.topo, self.acc, self.sys
        nus, c = topo.ultraservers, topo.chips_per_us
        tripped = self.us_tripped.any()
        dp = acc.tdp_w - acc.idle_w
        act_chip = util if full_clock else util * clock
        us_act = topo.per_us(act_chip)
        chip_p: FloatArray | None = None
        if full_clock and not tripped:
            powered = np.full(nus, float(c))
            if len(dead):
                powered -= np.bincount(topo.chip_us[dead], minlength=nus)
            us_chip_p = powered * acc.idle_w + dp * us_act
            us_chip_max = np.where(powered > 0, acc.idle_w + dp * topo.max_per_us(util), 0.0)
        else:
            if dyn_full is None:
                dyn_full = dp * util
            chip_p = power.chip_power_w(dyn_full, acc.idle_w, clock, self.cp.dvfs_exponent, alive)
            if tripped:
                chip_p = np.where(self.us_tripped[topo.chip_us], 0.0, chip_p)
            us_chip_p = topo.per_us(chip_p)
            us_chip_max = topo.max_per_us(chip_p)
        # Host power is linear in its server's mean chip activity, so an UltraServer's hosts sum
        # to its servers' power at the UltraServer's mean activity: no per-server pass.
        spu = topo.servers_per_us
        us_host_p = power.host_power_w(us_act / c, sysm.host_w_per_server * spu, sysm.host_idle_fraction)
        us_dc = np.where(self.us_tripped, 0.0, us_chip_p + us_host_p + sysm.switch_w)
        us_it = np.where(self.us_tripped, 0.0, power.rectifier_input_w(us_dc, topo.servers_per_us, self.pp))
        it_w = float(us_it.sum())
        return ItPower(
            chip_p,
            act_chip,
            us_it,
            it_w,
            it_w - float(us_dc.sum()),
            us_chip_p,
            us_chip_max,
            us_act,
            acc.idle_w,
            dp,
            dead,
        )

    def _rack_loops(
        self, liquid_us: FloatArray, m: FloatArray, sec_supply: float, ret0: FloatArray, dt_s: int
    ) -> tuple[FloatArray, FloatArray]:
        """(return temperature, coolant the cold plates see) per UltraServer [°C] after ``dt_s``
        with ``liquid_us`` [W] into each loop at mass flow ``m`` [kg/s]: the exact solution of
        C dT/dt = Q - m c_p (T - T_supply); a loop without flow stores the heat. Flowing loops
        present the mean of supply and return to the plates, a stagnant loop its own
        temperature; air-cooled systems see the CRAH supply air."""
        if self.lf <= 0:
            cp = self.cp
            air_in = cp.air_supply_c + max(self.plant.chw_supply_c - cp.chilled_water_c, 0.0)
            return ret0, np.full(self.topo.ultraservers, air_in)
        ret = cooling.loop_return_c(ret0, sec_supply, liquid_us, m, self.us_mass_kg, dt_s)
        return ret, np.where(m > 0, 0.5 * (sec_supply + ret), ret)

    def _protect(
        self,
        tj: FloatArray,
        clock: FloatArray,
        util: FloatArray,
        dyn_full: FloatArray,
        coolant_us: FloatArray,
        r_us: FloatArray,
    ) -> tuple[FloatArray, npt.NDArray[np.int64]] | None:
        """Clocks protected against this step's coolant and the UltraServers to shut down, or
        None when every chip is within its throttle curve (0.05 K tolerance)."""
        cp, topo = self.cp, self.topo
        over = (tj > cooling.allowed_junction_c(clock, cp) + 0.05) & (util > 0)
        if not over.any():
            return None
        k = cp.dvfs_exponent
        idx = np.flatnonzero(over)
        r = r_us[topo.chip_us[idx]]
        base = coolant_us[topo.chip_us[idx]] + r * self.acc.idle_w
        f = cooling.thermal_clock(base, r * dyn_full[idx], clock[idx], k, cp)
        clock = clock.copy()
        clock[idx] = np.minimum(clock[idx], f)
        hot = base + r * dyn_full[idx] * clock[idx] ** k > cp.shutdown_temp_c
        shut = np.unique(topo.chip_us[idx[hot]]).astype(np.int64)
        return clock, shut

    def _cold_plate_r(self, flow_fraction: FloatArray) -> FloatArray:
        """Junction-to-coolant resistance per UltraServer [K/W] at the CDU pumps' health."""
        cp = self.cp
        return cooling.cold_plate_r_k_per_w(
            self.plate_r, cp.cold_plate_convective_share, cp.natural_convection_speed, flow_fraction
        )

    def it_per_facility_w(self, it_w: float, cond: Conditions, dt_s: int) -> float:
        """IT over facility power if this step's IT power ``it_w`` met the plant and the power
        chain as they are (the plant's state is left as it was): a first step's ratio, before
        any step has measured one. The liquid share goes to the facility water at once (the
        loops store none), so the plant's power is if anything overstated: a cap converted with
        it errs towards holding."""
        saved = self.plant
        self.plant = dataclasses.replace(saved)
        try:
            out = self._plant(self.lf * it_w, (1 - self.lf) * it_w, cond, dt_s)
        finally:
            self.plant = saved
        cooling_w = out["chiller_w"] + out["pumps_w"] + out["fans_w"]
        facility_w = (
            it_w + cooling_w + power.chain_losses(it_w, cooling_w, self.ups_rating_w, self.pp).total_w
        )
        return it_w / facility_w if facility_w > 0 else 1.0

    def _plant(self, liquid_w: float, air_w: float, cond: Conditions, dt_s: int) -> dict[str, float]:
        return plant.plant_step(self, liquid_w, air_w, cond, dt_s)

    def _next_clock(
        self,
        util: FloatArray,
        alive: BoolArray,
        dyn_full: FloatArray | None,
        it_w: float,
        facility_w: float,
        us_it: FloatArray,
        coolant_us: FloatArray,
        r_us: FloatArray,
    ) -> FloatArray:
        """Clock per chip for the next step (``twin.capping``)."""
        return capping.next_clock(self, util, alive, dyn_full, it_w, facility_w, us_it, coolant_us, r_us)
