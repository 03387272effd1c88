"""What one facility step hands on: the chips' part (``ItStep``, before the plant and the power
chain) and the step's record (``FacilityStep``; ``record`` builds it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin.physics import cooling, power
from twin.physics.itpower import ItPower
from twin.physics.load import Load
from twin.physics.plant import PlantResult
from twin.physics.site import Conditions
from twin.spec.events import Events

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(slots=True)
class Heat:
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
    dyn_full: FloatArray | None  # (P_tdp - P_idle) u [W], where the step derived it
    m: FloatArray  # rack loop mass flow [kg/s]
    liquid_us: FloatArray  # heat into each rack loop: the liquid share of its IT power [W]


@dataclass(slots=True)
class ItStep:
    """What a facility's own chips did in a step, before the plant and the power chain
    (``Facility.step_it``)."""

    heat: Heat
    load: Load  # utilisation at full clock, 0 on unpowered chips (per chip when asked) [-]
    dyn_full: FloatArray | None
    to_fw_w: float  # heat handed to the facility water over the step [W]
    air_heat_w: float  # heat into the room air [W]
    it_w: float
    us_off: BoolArray
    tripped_chips: npt.NDArray[np.int64]
    recovered_chips: npt.NDArray[np.int64]
    events: Events
    loops_stored_w: float = 0.0  # heat the rack loops stored over the step (rate) [W]


@dataclass(slots=True)
class FacilityStep:
    """Everything the record needs from one physics step. Per-UltraServer sums and maxima come
    with the step; per-chip junction temperatures are derived on demand (``chip_tj``) from the
    UltraServer's coolant and resistance, since only sampled steps and the live view read them;
    so is each chip's work rate (``act_chip``) at full clock. Not written after ``record``
    builds it (not frozen: a frozen dataclass of this size costs several microseconds a step to
    build)."""

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
    it_power_w: float
    chip_power_w: float
    psu_loss_w: float
    pdu_loss_w: float
    ups_loss_w: float
    transformer_loss_w: float
    chiller_power_w: float
    pump_power_w: float
    fan_power_w: float
    free_cooling_fraction: float
    chiller_cop: float
    water_l: float
    facility_water_supply_c: float
    coolant_supply_c: float  # CDU secondary supply = facility water + CDU approach [°C]
    unmet_heat_w: float
    # The heat balance (``plant.run``): IT heat = heat_rejected_w + heat_stored_w, the stored
    # heat counting the rack loops' too.
    heat_rejected_w: float
    heat_stored_w: float
    unrejected_fraction: float
    chilled_water_supply_c: float
    facility_cap_w: float  # NaN: none
    # The plant's figures (``plant.run``), its units' (``plant.UNIT_COLUMNS``) among them.
    units: PlantResult
    throttled_chips: int
    protected: bool  # a power cap or junction protection lowered clocks inside this step
    cond: Conditions
    us_off: BoolArray  # UltraServers powered off by thermal protection during this step
    tripped_chips: npt.NDArray[np.int64]  # chips that went offline this step (thermal trip)
    recovered_chips: npt.NDArray[np.int64]  # chips back after a thermal trip
    events: Events  # what the physics reported this step (trips, throttling, effects ending)
    chip_r_scale: FloatArray | None = None  # each chip's resistance factor h (None: 1)

    @property
    def act_chip(self) -> FloatArray:
        """Work rate per chip = utilisation x clock [-]."""
        return self.pw.act_chip

    @property
    def chip_p(self) -> FloatArray:
        """Power of every chip [W]."""
        return self.pw.chip_p

    def busy_chips(self, owner: npt.NDArray[np.int32] | None = None) -> BoolArray:
        """Chips held by a job and doing work in the step: a work rate above 0 (``owner``: the
        chips' owners now, when jobs may have ended since the physics: their chips no longer
        count)."""
        busy = self.act_chip > 0
        if owner is not None:
            busy &= owner >= 0
        return busy

    def us_busy(self, owner: npt.NDArray[np.int32] | None = None) -> npt.NDArray[np.int64]:
        """``busy_chips`` counted per UltraServer; at full clock from the load's segments (a
        segment's chips are busy together: its job's activity above 0 and, given ``owner`` (the
        chip pool's owners now), its chips still held: looked up only for the segments whose
        first chip changed since the load, the others' are as the load found them)."""
        nus = len(self.us_it)
        pw = self.pw
        seg, act = pw.load.seg, pw.load.seg_act
        if pw.by_segment and seg is not None and act is not None:
            busy = act > 0
            if owner is not None:
                first = seg.first
                moved = pw.load.changed()
                if moved is None:
                    busy &= owner[first] >= 0
                elif len(moved) and len(first):
                    k = np.minimum(np.searchsorted(first, moved), len(first) - 1)
                    k = k[first[k] == moved]  # the segments a changed chip begins
                    busy[k] &= owner[first[k]] >= 0
            # Chip counts as float weights (0 where not busy): exact in any order of addition.
            out: npt.NDArray[np.int64] = np.bincount(seg.us, weights=seg.n * busy, minlength=nus).astype(
                np.int64
            )
            return out
        chips = self.busy_chips(owner).view(np.uint8).reshape(nus, -1)
        counts: npt.NDArray[np.int64] = np.add.reduce(chips, axis=1, dtype=np.int64)  # beats count_nonzero
        return counts

    def chip_tj(self) -> FloatArray:
        """Junction temperature of every chip [°C] (``cooling.junction_c``, T_j = coolant + h R P)."""
        # Per UltraServer (its chips consecutive): its coolant and resistance broadcast over them.
        nus = len(self.us_coolant_c)
        r = self.us_r_k_per_w[:, None]
        if self.chip_r_scale is not None:
            r = r * self.chip_r_scale.reshape(nus, -1)
        out: FloatArray = cooling.junction_c(
            self.us_coolant_c[:, None], r, self.chip_p.reshape(nus, -1)
        ).ravel()
        return out

    @property
    def cooling_power_w(self) -> float:
        return power.cooling_w(self.chiller_power_w, self.pump_power_w, self.fan_power_w)

    @property
    def power_loss_w(self) -> float:
        return self.pdu_loss_w + self.ups_loss_w + self.transformer_loss_w

    @property
    def facility_power_w(self) -> float:
        return power.facility_w(self.it_power_w, self.cooling_power_w, self.power_loss_w)

    @property
    def pue(self) -> float:
        """Facility / IT power; undefined (NaN) while every system is powered off."""
        return self.facility_power_w / self.it_power_w if self.it_power_w > 0 else math.nan


def record(
    part: ItStep,
    plant_out: PlantResult,
    losses: power.ChainLosses,
    fw_supply_c: float,
    coolant_supply_c: float,
    facility_cap_w: float,
    throttled: int,
    cond: Conditions,
    chip_r_scale: FloatArray | None = None,
) -> FacilityStep:
    """The step's record from the chips' part, the plant's answer and the power chain's losses."""
    th = part.heat
    pw = th.pw
    return FacilityStep(
        pw=pw,
        clock=th.clock,
        full_clock=th.full_clock,
        protected=th.protected,
        us_it=pw.us_it,
        us_return_c=th.ret,
        us_chip_w=pw.us_chip_w,
        us_act=pw.us_act,
        us_tj_max=th.us_tj_max,
        us_coolant_c=th.coolant,
        us_r_k_per_w=th.r_us,
        it_power_w=pw.it_w,
        chip_power_w=float(np.add.reduce(pw.us_chip_w)),  # = .sum(), without its Python wrapper
        psu_loss_w=pw.psu_loss_w,
        pdu_loss_w=losses.pdu_w,
        ups_loss_w=losses.ups_w,
        transformer_loss_w=losses.transformer_w,
        chiller_power_w=plant_out.chiller_power_w,
        pump_power_w=plant_out.pump_power_w,
        fan_power_w=plant_out.fan_power_w,
        free_cooling_fraction=plant_out.free_cooling_fraction,
        chiller_cop=plant_out.chiller_cop,
        water_l=plant_out.water_l,
        facility_water_supply_c=fw_supply_c,
        coolant_supply_c=coolant_supply_c,
        unmet_heat_w=plant_out.unmet_heat_w,
        heat_rejected_w=plant_out.heat_rejected_w,
        heat_stored_w=plant_out.heat_stored_w + part.loops_stored_w,
        unrejected_fraction=plant_out.unrejected_fraction,
        chilled_water_supply_c=plant_out.chilled_water_supply_c,
        facility_cap_w=facility_cap_w if math.isfinite(facility_cap_w) else math.nan,
        units=plant_out,
        throttled_chips=throttled,
        cond=cond,
        us_off=part.us_off,
        tripped_chips=part.tripped_chips,
        recovered_chips=part.recovered_chips,
        events=part.events,
        chip_r_scale=chip_r_scale,
    )
