"""The hardware fact table: accelerators and the systems built from them.

Every number carries its source and a confidence tag, following the project's fact sheet:
OFF (vendor documentation), OFF-2 (vendor claim via press), 3P (third party), DER (derived here by
arithmetic), ASM (modelling assumption; override it from the scenario). This module holds data
and derived figures only: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

TERA = 1e12
PETA = 1e15
GIB = 1024**3
GB = 1e9


PRECISIONS = ("fp32", "bf16", "fp8", "fp4")
_ALIASES = {"mxfp8": "fp8", "mxfp4": "fp4", "fp16": "bf16", "tf32": "bf16", "fp8_e4m3": "fp8"}


def normalize_precision(precision: str) -> str:
    """Generic precision name for an alias (``mxfp8`` -> ``fp8``)."""
    p = precision.lower()
    return _ALIASES.get(p, p)


@dataclass(frozen=True)
class Accelerator:
    """One accelerator chip. Peak rates are dense FLOP/s per precision."""

    key: str
    name: str
    peak_flops: dict[str, float]  # precision -> dense FLOP/s [FLOP/s]
    hbm_bytes: float  # [B]
    hbm_bw_bytes_s: float  # [B/s]
    tdp_w: float  # [W]
    idle_fraction: float  # idle power / TDP [-]
    tdp_assumed: bool  # True when the TDP is a modelling assumption (no published figure)
    roadmap: bool = False  # True for announced-but-not-shipping parts (projection)
    sources: dict[str, str] = field(default_factory=dict)
    # HBM bandwidth a streaming kernel achieves / nominal [-]. 3P: Azure ND GB200 v6 measured
    # 7.35 of 8 TB/s per GPU, 92 % (Microsoft Tech Community, "Unpacking NVIDIA GB200 GPU
    # performance on Azure Virtual Machines", 2025). ASM for the other chips (no measurement
    # read): the same 92 % (HBM3/HBM3e controllers of one generation).
    hbm_efficiency: float = 0.92

    @property
    def idle_w(self) -> float:
        """Idle power [W]."""
        return self.tdp_w * self.idle_fraction

    def peak(self, precision: str) -> float:
        """Dense peak at a precision [FLOP/s]. Names are generic (``bf16``, ``fp8``, ``fp4``,
        ``fp32``; ``mxfp8``/``mxfp4``/``fp16`` are accepted as aliases). A chip without an FP4
        path runs FP4 work at its FP8 rate (weights are upcast: FP4 saves memory, not compute)."""
        key = normalize_precision(precision)
        if key in self.peak_flops:
            return self.peak_flops[key]
        if key == "fp4" and "fp8" in self.peak_flops:
            return self.peak_flops["fp8"]
        raise KeyError(f"{self.name} has no {precision!r} rate; it has {', '.join(self.peak_flops)}")

    def supports(self, precision: str) -> bool:
        try:
            self.peak(precision)
        except KeyError:
            return False
        return True


@dataclass(frozen=True)
class System:
    """A scale-up system (UltraServer, NVL72 rack, HGX node) built from one accelerator."""

    key: str
    name: str
    accelerator: str  # Accelerator.key
    chips: int  # chips per system (the scale-up domain)
    servers: int  # servers (sleds/trays/nodes) per system
    racks: int  # racks per system
    host_w_per_server: float  # host CPU/DRAM/NIC/fans at full load, per server [W]
    host_idle_fraction: float  # host idle / full [-]
    switch_w: float  # scale-up switches per system [W]
    liquid_fraction: float  # share of IT heat removed by direct-to-chip liquid [-]
    roadmap: bool = False
    chip_tdp_w: float | None = None  # system-specific chip power limit (e.g. air-cooled variant)
    # Price of one system, hosts and scale-up switches included [USD]. No vendor publishes these:
    # every figure is ASM (sources["capex_usd"] says what it rests on); override with
    # ``[tco] system_capex_usd``. Prices are the least certain inputs of the twin.
    capex_usd: float = 0.0
    # On-demand cloud price per chip-hour of a comparable instance [USD/h] (0 = none known).
    cloud_usd_per_chip_hour: float = 0.0
    # Fabric tiers per chip (twin.work.fabric): scale-up inside the system (NeuronLink, NVLink) and
    # scale-out between systems (EFA, InfiniBand/Ethernet): bandwidth [B/s] and per-hop latency [s].
    scaleup_bw_bytes_s: float = 2.0e12
    scaleup_latency_s: float = 2e-6
    scaleout_bw_bytes_s: float = 25e9
    scaleout_latency_s: float = 15e-6
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def chips_per_server(self) -> int:
        return self.chips // self.servers

    @property
    def family(self) -> str:
        """Software family of the system's accelerator: "trainium" (AWS Neuron SDK) or "gpu"
        (NVIDIA CUDA); work that needs one runs only there (``twin.work.routing``)."""
        return "trainium" if self.accelerator.startswith("trainium") else "gpu"


ACCELERATORS: dict[str, Accelerator] = {
    a.key: a
    for a in [
        Accelerator(
            key="trainium3",
            name="AWS Trainium3",
            peak_flops={
                "fp8": 2517 * TERA,  # MXFP8
                "fp4": 2517 * TERA,  # MXFP4 is converted to MXFP8 before the tensor engine
                "bf16": 671 * TERA,
                "fp32": 183 * TERA,
            },
            hbm_bytes=144 * GIB,
            hbm_bw_bytes_s=4.9e12,
            # DER: AWS publishes no TDP. Its chip-level claim "40 % better energy efficiency" than
            # Trainium2 (OFF-2, re:Invent 2025 keynote slide via nextplatform.com 2025-12-03), read
            # as peak FP8 FLOP/s per W, with Trainium2 at ~500 W (3P, low confidence): 2,517 / 1,299
            # / 1.4 x 500 W = 692 W, rounded to 700 W (facts §5: 700-750 W). The range of the
            # comparisons is 700-1,100 W (``twin.work.sensitivity``); 900 W was the earlier ASM default.
            tdp_w=700.0,
            idle_fraction=0.20,
            tdp_assumed=True,
            sources={
                "peak_flops": "OFF: AWS Neuron docs, about-neuron/arch/neuron-hardware/trainium3.rst",
                "hbm": "OFF: trainium3.rst (144 GiB, 4.9 TB/s; NKI guide says 4.7 TB/s)",
                "tdp_w": "DER: not published by AWS; '40 % better energy efficiency' than Trainium2 "
                "(OFF-2, nextplatform.com 2025-12-03) as peak FP8/W with Trn2 ~500 W (3P): "
                "2,517/1,299/1.4 x 500 W = 692 W -> 700 W; range 700-1,100 W (900 W the earlier ASM; facts §5)",
                "idle_fraction": "ASM: 15-25 % of TDP (A100 60/400 W, MI250X 88/560 W; facts §5): 140 W at 700 W",
            },
        ),
        Accelerator(
            key="trainium2",
            name="AWS Trainium2",
            peak_flops={"fp8": 1299 * TERA, "bf16": 667 * TERA, "fp32": 181 * TERA},
            hbm_bytes=96 * GIB,
            hbm_bw_bytes_s=2.9e12,
            tdp_w=500.0,
            idle_fraction=0.20,
            tdp_assumed=True,
            sources={
                "peak_flops": "OFF: Neuron docs, about-neuron/arch/neuron-hardware/trainium2.rst",
                "hbm": "OFF: trainium2.rst (96 GiB, 2.9 TB/s)",
                "tdp_w": "3P (low confidence): ~500 W, inference-margins engine.js",
                "idle_fraction": "ASM: 15-25 % of TDP (facts §5)",
            },
        ),
        Accelerator(
            key="trainium4",
            name="AWS Trainium4 (roadmap projection)",
            peak_flops={
                "fp8": 3 * 2517 * TERA,  # "3x FP8 compute vs Trainium3"
                "fp4": 6 * 2517 * TERA,  # ">= 6x FP4 compute vs Trainium3"
                "bf16": 3 * 671 * TERA,  # ASM: BF16 scales with FP8
            },
            # OFF-2/3P (doubtful): "2x HBM capacity" vs Trainium3 as reported in press summaries of
            # the announcement; not found in any source read (facts §4). 2 x 144 GiB.
            hbm_bytes=2 * 144 * GIB,
            hbm_bw_bytes_s=4 * 4.9e12,  # "4x memory bandwidth vs Trainium3"
            tdp_w=1400.0,
            idle_fraction=0.20,
            tdp_assumed=True,
            roadmap=True,
            sources={
                "peak_flops": "OFF-2: re:Invent 2025 recap (nand-research.com): 6x FP4, 3x FP8",
                "hbm": "OFF-2: 4x memory bandwidth; OFF-2/3P (doubtful): 2x HBM capacity = 288 GiB as "
                "press summaries report the announcement, not found in any source read (facts §4)",
                "tdp_w": "ASM: projection, no source",
            },
        ),
        Accelerator(
            key="gb200",
            name="NVIDIA GB200 (Blackwell, in NVL72)",
            peak_flops={"fp8": 5 * PETA, "fp4": 10 * PETA, "bf16": 2.5 * PETA},
            hbm_bytes=186 * GB,
            hbm_bw_bytes_s=8e12,
            tdp_w=1200.0,
            idle_fraction=0.15,
            tdp_assumed=False,
            sources={
                "peak_flops": "3P: glennklockwood.com/garden/processors/B200 (NVIDIA values @1,200 W)",
                "hbm": "3P: MLPerf v6.1 system JSON (186 GB usable)",
                "idle_fraction": "3P: A100 idle ~60 W of 400 W (Acme trace cdf_power)",
            },
        ),
        Accelerator(
            key="gb300",
            name="NVIDIA GB300 (Blackwell Ultra, in NVL72)",
            peak_flops={"fp8": 5 * PETA, "fp4": 15 * PETA, "bf16": 2.5 * PETA},
            hbm_bytes=288 * GB,
            hbm_bw_bytes_s=8e12,
            tdp_w=1400.0,
            idle_fraction=0.15,
            tdp_assumed=False,
            sources={
                "peak_flops": "3P: verda.com/blog/gb300-nvl72-architecture; glennklockwood B300",
                "hbm": "3P: verda.com (288 GB, 8 TB/s)",
                "tdp_w": "3P: verda.com (1,400 W)",
            },
        ),
        Accelerator(
            key="b200",
            name="NVIDIA B200 (HGX)",
            peak_flops={"fp8": 4.5 * PETA, "fp4": 9 * PETA, "bf16": 2.25 * PETA},
            hbm_bytes=180 * GB,
            hbm_bw_bytes_s=8e12,
            tdp_w=1000.0,
            idle_fraction=0.15,
            tdp_assumed=False,
            sources={
                "peak_flops": "3P: glennklockwood.com/garden/processors/B200",
                "tdp_w": "3P: MLPerf v6.0 Nebius system JSON (B200 TGP 1000W)",
            },
        ),
        Accelerator(
            key="b300",
            name="NVIDIA B300 (HGX)",
            peak_flops={"fp8": 4.5 * PETA, "fp4": 13.5 * PETA, "bf16": 2.25 * PETA},
            hbm_bytes=270 * GB,
            hbm_bw_bytes_s=7.7e12,
            tdp_w=1100.0,
            idle_fraction=0.15,
            tdp_assumed=False,
            sources={
                "peak_flops": "3P: verda.com; glennklockwood.com (FP4 ~13-14 PF)",
                "tdp_w": "3P: 1,100 W (verda.com) vs 1,400 W (glennklockwood) - conflicting",
            },
        ),
        Accelerator(
            key="h100",
            name="NVIDIA H100 SXM",
            peak_flops={"fp8": 1.979 * PETA, "bf16": 0.989 * PETA},
            hbm_bytes=80 * GB,
            hbm_bw_bytes_s=3.35e12,
            tdp_w=700.0,
            idle_fraction=0.15,
            tdp_assumed=False,
            sources={"all": "OFF: NVIDIA H100 SXM datasheet (standard spec; facts §6)"},
        ),
    ]
}


SYSTEMS: dict[str, System] = {
    s.key: s
    for s in [
        System(
            key="trn3-gen2",
            name="Trn3 Gen2 UltraServer",
            accelerator="trainium3",
            chips=144,
            servers=36,
            racks=2,
            host_w_per_server=500.0,
            host_idle_fraction=0.6,
            switch_w=4000.0,
            liquid_fraction=0.85,
            capex_usd=3_000_000.0,
            scaleup_bw_bytes_s=2.0e12,
            scaleout_bw_bytes_s=25e9,
            sources={
                "scaleup_bw_bytes_s": "OFF: NeuronLink-v4 2,048 GiB/s per device (trn3-arch.rst; 2.56 TB/s in trainium3.rst, 704 GB/s PCIe link inventory: facts §2/§12 uncertainty 4, 2.0 TB/s nominal)",
                "scaleout_bw_bytes_s": "OFF/DER: EFA 200 Gb/s per chip = 25 GB/s (trn3-arch.rst, facts §2)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: no published price; ~$21k per chip, below an NVL72's per-GPU figure",
                "chips": "OFF: Neuron docs trn3-arch.rst (144 chips = 36 servers x 4)",
                "racks": "ASM: 2 racks x 18 sleds (SemiAnalysis 'NL72x2'; facts §2)",
                "host_w_per_server": "ASM: host+switch overhead 15-25 % of chip power (facts §5)",
                "liquid_fraction": "ASM: cold plates remove ~80-90 % of heat (facts §8.2)",
            },
        ),
        System(
            key="trn3-gen1",
            name="Trn3 Gen1 UltraServer",
            accelerator="trainium3",
            chips=64,
            servers=4,
            racks=2,
            host_w_per_server=2000.0,
            host_idle_fraction=0.6,
            switch_w=2000.0,
            liquid_fraction=0.0,
            chip_tdp_w=700.0,
            capex_usd=1_300_000.0,
            scaleup_bw_bytes_s=2.0e12,
            scaleout_bw_bytes_s=25e9,
            sources={
                "scaleup_bw_bytes_s": "OFF: NeuronLink-v4 2,048 GiB/s per device (trn3-arch.rst; 2.56 TB/s in trainium3.rst, 704 GB/s PCIe link inventory: facts §2/§12 uncertainty 4, 2.0 TB/s nominal)",
                "scaleout_bw_bytes_s": "OFF/DER: EFA 200 Gb/s per chip = 25 GB/s (trn3-arch.rst, facts §2)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: no published price; ~$20k per chip (64 chips, air-cooled)",
                "chips": "OFF: trn3-arch.rst (64 chips = 4 servers x 16)",
                "chip_tdp_w": "ASM: air-cooled Gen1 variant at 700 W => ~55 kW per UltraServer (facts §5)",
                "liquid_fraction": "ASM: Gen1 air-cooled (3P summaries; facts §2)",
            },
        ),
        System(
            key="trn2-ultra",
            name="Trn2 UltraServer",
            accelerator="trainium2",
            chips=64,
            servers=4,
            racks=4,
            host_w_per_server=2000.0,
            host_idle_fraction=0.6,
            switch_w=1000.0,
            liquid_fraction=0.0,
            capex_usd=1_000_000.0,
            cloud_usd_per_chip_hour=2.79,
            scaleup_bw_bytes_s=1.28e12,
            scaleout_bw_bytes_s=25e9,
            sources={
                "scaleup_bw_bytes_s": "OFF: NeuronLink-v3 1.28 TB/s per chip (trainium2.rst; facts §3)",
                "scaleout_bw_bytes_s": "DER: EFAv3 3.2 Tbps per 16-chip trn2.48xlarge = 200 Gb/s per chip (trn2-arch.rst)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: no published price; ~$16k per chip",
                "cloud_usd_per_chip_hour": "ASM: AWS EC2 on-demand list price of trn2.48xlarge (~$44.70/h for 16 chips, us-east-1), recalled, not read at source",
                "chips": "OFF: trn2-arch.rst (64 chips, 4 x trn2u.48xlarge, 83.2 PF FP8)",
                "liquid_fraction": "OFF-2: Trainium2 air-cooled (AWS VP via fierce-network.com)",
            },
        ),
        System(
            key="gb200-nvl72",
            name="GB200 NVL72",
            accelerator="gb200",
            chips=72,
            servers=18,
            racks=1,
            host_w_per_server=1900.0,  # 2 Grace + NICs + fans per tray, sized to the 125 kW rack (ASM)
            host_idle_fraction=0.5,
            switch_w=3600.0,
            liquid_fraction=0.85,
            capex_usd=3_100_000.0,
            scaleup_bw_bytes_s=1.8e12,
            scaleout_bw_bytes_s=50e9,
            sources={
                "scaleup_bw_bytes_s": "DER: NVLink 5, 130 TB/s per NVL72 / 72 GPUs = 1.8 TB/s (facts §6)",
                "scaleout_bw_bytes_s": "ASM: 400 Gb/s InfiniBand/Ethernet per GPU (ConnectX-7 class; not in facts)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "3P: 'a rack of Blackwell GPUs costs $3.1 million' (fetchlogic.net 2026, citing SemiAnalysis); press ~$3M",
                "chips": "OFF: NVIDIA NVL72 (72 GPU + 36 Grace, 18 compute trays)",
                "power": "ASM: ~125 kW rack at full load (facts §6)",
            },
        ),
        System(
            key="gb300-nvl72",
            name="GB300 NVL72",
            accelerator="gb300",
            chips=72,
            servers=18,
            racks=1,
            host_w_per_server=900.0,
            host_idle_fraction=0.5,
            switch_w=3600.0,
            liquid_fraction=0.85,
            capex_usd=3_900_000.0,
            scaleup_bw_bytes_s=1.8e12,
            scaleout_bw_bytes_s=100e9,
            sources={
                "scaleup_bw_bytes_s": "DER: NVLink 5, 130 TB/s per NVL72 / 72 GPUs = 1.8 TB/s (facts §6)",
                "scaleout_bw_bytes_s": "ASM: 800 Gb/s InfiniBand/Ethernet per GPU (ConnectX-8 class; not in facts)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: ~25 % above GB200 NVL72's $3.1M (press estimates, not read at source)",
                "chips": "OFF: NVIDIA NVL72 (72 GPU, 18 compute trays, 9 NVLink trays)",
                "power": "3P: tray build-up 18 x ~6.5 kW + 3.6 kW switches = ~121 kW (introl.com)",
            },
        ),
        System(
            key="hgx-b200",
            name="HGX B200 (8-GPU)",
            accelerator="b200",
            chips=8,
            servers=1,
            racks=1,
            host_w_per_server=5000.0,
            host_idle_fraction=0.5,
            switch_w=0.0,
            liquid_fraction=0.0,
            capex_usd=450_000.0,
            scaleup_bw_bytes_s=1.8e12,
            scaleout_bw_bytes_s=50e9,
            sources={
                "scaleup_bw_bytes_s": "ASM: NVLink 5 as in NVL72, 1.8 TB/s per GPU (facts §6)",
                "scaleout_bw_bytes_s": "ASM: 400 Gb/s InfiniBand/Ethernet per GPU",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: press estimates of $400-500k per 8-GPU server (not read at source)",
                "power": "3P: DGX B200 ~14.3 kW per server (The Register)",
            },
        ),
        System(
            key="hgx-b300",
            name="HGX B300 (8-GPU)",
            accelerator="b300",
            chips=8,
            servers=1,
            racks=1,
            host_w_per_server=5000.0,
            host_idle_fraction=0.5,
            switch_w=0.0,
            liquid_fraction=0.0,
            capex_usd=550_000.0,
            scaleup_bw_bytes_s=1.8e12,
            scaleout_bw_bytes_s=100e9,
            sources={
                "scaleup_bw_bytes_s": "ASM: NVLink 5 as in NVL72, 1.8 TB/s per GPU (facts §6)",
                "scaleout_bw_bytes_s": "ASM: 800 Gb/s InfiniBand/Ethernet per GPU",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: ~20 % above HGX B200",
                "power": "ASM: host/NVSwitch overhead as HGX B200 (DGX B200 ~14.3 kW, The Register)",
            },
        ),
        System(
            key="trn4-ultra",
            name="Trainium4 UltraServer (roadmap projection)",
            accelerator="trainium4",
            chips=144,
            servers=36,
            racks=2,
            host_w_per_server=500.0,
            host_idle_fraction=0.6,
            switch_w=6000.0,
            liquid_fraction=0.9,
            roadmap=True,
            capex_usd=4_000_000.0,
            scaleup_bw_bytes_s=2.0e12,
            scaleout_bw_bytes_s=25e9,
            sources={
                "scaleup_bw_bytes_s": "OFF: NeuronLink-v4 2,048 GiB/s per device (trn3-arch.rst; 2.56 TB/s in trainium3.rst, 704 GB/s PCIe link inventory: facts §2/§12 uncertainty 4, 2.0 TB/s nominal)",
                "scaleout_bw_bytes_s": "OFF/DER: EFA 200 Gb/s per chip = 25 GB/s (trn3-arch.rst, facts §2)",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "ASM: roadmap projection, no price",
                "chips": "ASM: projection, same 144-chip domain as Trn3 Gen2 (no published figure)",
                "liquid_fraction": "ASM: liquid-cooled like Trn3 Gen2",
            },
        ),
        System(
            key="hgx-h100",
            name="HGX H100 (8-GPU)",
            accelerator="h100",
            chips=8,
            servers=1,
            racks=1,
            host_w_per_server=2800.0,
            host_idle_fraction=0.5,
            switch_w=0.0,
            liquid_fraction=0.0,
            capex_usd=250_000.0,
            cloud_usd_per_chip_hour=6.88,
            scaleup_bw_bytes_s=0.9e12,
            scaleout_bw_bytes_s=50e9,
            sources={
                "scaleup_bw_bytes_s": "ASM: NVLink 4, 900 GB/s per GPU (NVIDIA H100 SXM datasheet, standard spec; not in facts)",
                "scaleout_bw_bytes_s": "ASM: 400 Gb/s InfiniBand per GPU",
                "latency": "ASM: per-hop latency scale-up 2 us, scale-out 15 us (AWS: Neuron Fabric chip-to-chip < 10 us, OFF-2 weak; facts §2)",
                "capex_usd": "3P/ASM: H100 ~$25k per GPU (fetchlogic.net 2026) x 8 + ~$50k host and baseboard; press $250-350k per server",
                "cloud_usd_per_chip_hour": "ASM: AWS EC2 on-demand list price of p5.48xlarge after the June 2025 cut (~$55/h for 8 H100), recalled, not read at source",
                "power": "3P: HGX H100 node rated 10.2 kW (Latif et al., arXiv 2412.08602)",
            },
        ),
    ]
}


def accelerator(key: str, overrides: dict[str, Any] | None = None) -> Accelerator:
    """Catalog accelerator with scenario overrides applied (e.g. ``tdp_w`` for Trainium3)."""
    acc = ACCELERATORS[key]
    if overrides:
        acc = replace(acc, **overrides)
    return acc


def system(key: str, overrides: dict[str, Any] | None = None) -> System:
    """Catalog system with scenario overrides applied."""
    sysm = SYSTEMS[key]
    if overrides:
        sysm = replace(sysm, **overrides)
    return sysm


def accelerator_for(sysm: System, overrides: dict[str, Any] | None = None) -> Accelerator:
    """The system's accelerator with the system's chip power limit, then scenario overrides."""
    acc = ACCELERATORS[sysm.accelerator]
    if sysm.chip_tdp_w is not None:
        acc = replace(acc, tdp_w=sysm.chip_tdp_w)
    return replace(acc, **overrides) if overrides else acc


def system_peak_flops(sysm: System, acc: Accelerator, precision: str) -> float:
    """Dense peak of a whole system [FLOP/s] (DER: chips x per-chip peak)."""
    return sysm.chips * acc.peak(precision)


def system_full_load_it_w(sysm: System, acc: Accelerator) -> float:
    """IT power of one system with every chip at TDP and hosts at full load [W]."""
    return sysm.chips * acc.tdp_w + sysm.servers * sysm.host_w_per_server + sysm.switch_w
