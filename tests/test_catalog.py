"""Catalog figures reproduced from per-chip numbers against published per-system totals."""

from __future__ import annotations

import pytest

from twin.spec import catalog

GIB = 1024**3


def test_trn3_gen2_ultraserver_matches_published_totals() -> None:
    # AWS Neuron docs trn3-arch.rst: 362,448 TFLOPS MXFP8, 96,624 TFLOPS BF16, 20,736 GiB HBM,
    # 705.6 TB/s for the 144-chip Gen2 UltraServer.
    sysm = catalog.system("trn3-gen2")
    acc = catalog.accelerator(sysm.accelerator)
    assert sysm.chips == 144 and sysm.chips_per_server == 4
    assert catalog.system_peak_flops(sysm, acc, "mxfp8") == pytest.approx(362_448e12)
    assert catalog.system_peak_flops(sysm, acc, "bf16") == pytest.approx(96_624e12)
    assert sysm.chips * acc.hbm_bytes == pytest.approx(20_736 * GIB)
    assert sysm.chips * acc.hbm_bw_bytes_s == pytest.approx(705.6e12)


def test_trn3_gen1_and_trn2_ultraserver_totals() -> None:
    gen1 = catalog.system("trn3-gen1")
    acc3 = catalog.accelerator("trainium3")
    assert catalog.system_peak_flops(gen1, acc3, "mxfp8") == pytest.approx(161_088e12)
    assert gen1.chips * acc3.hbm_bw_bytes_s == pytest.approx(313.6e12)
    trn2 = catalog.system("trn2-ultra")
    acc2 = catalog.accelerator("trainium2")
    # trn2-arch.rst: 83.2 PF FP8, 6,144 GiB, 185.6 TB/s for 64 chips.
    assert catalog.system_peak_flops(trn2, acc2, "mxfp8") == pytest.approx(83.2e15, rel=2e-3)
    assert trn2.chips * acc2.hbm_bytes == pytest.approx(6144 * GIB)
    assert trn2.chips * acc2.hbm_bw_bytes_s == pytest.approx(185.6e12)


def test_trainium3_mxfp4_runs_at_mxfp8_rate_and_bf16_is_a_quarter() -> None:
    acc = catalog.accelerator("trainium3")
    assert acc.peak("mxfp4") == acc.peak("mxfp8")
    assert acc.peak("bf16") / acc.peak("mxfp8") == pytest.approx(0.2666, abs=0.01)


def test_gb300_nvl72_dense_fp8_about_360_pf() -> None:
    sysm = catalog.system("gb300-nvl72")
    acc = catalog.accelerator(sysm.accelerator)
    assert catalog.system_peak_flops(sysm, acc, "fp8") == pytest.approx(360e15)
    assert catalog.system_peak_flops(sysm, acc, "fp4") == pytest.approx(1080e15)


def test_generic_precision_names_and_fp4_fallback() -> None:
    trn2 = catalog.accelerator("trainium2")
    assert trn2.peak("fp4") == trn2.peak("fp8") == trn2.peak("mxfp8")  # no FP4 path: FP8 rate
    h100 = catalog.accelerator("h100")
    assert h100.peak("fp4") == h100.peak("fp8")
    gb300 = catalog.accelerator("gb300")
    assert gb300.peak("fp4") == 3 * gb300.peak("fp8")
    with pytest.raises(KeyError, match="no 'int3' rate"):
        gb300.peak("int3")


def test_every_system_reproduces_its_per_system_power_band() -> None:
    # Full-load IT power per system (chips at TDP + hosts + switches) against the fact sheet's
    # rack-level figures: GB200 NVL72 ~120-125 kW, GB300 NVL72 ~121-142 kW (facts §6), DGX B200
    # ~14.3 kW (The Register), HGX H100 node rated 10.2 kW (Latif et al.).
    bands = {
        "trn3-gen1": (50e3, 55e3),
        "gb200-nvl72": (115e3, 130e3),
        "gb300-nvl72": (118e3, 142e3),
        "hgx-b200": (12e3, 15e3),
        "hgx-h100": (8e3, 10.5e3),
    }
    for key, (lo, hi) in bands.items():
        sysm = catalog.system(key)
        w = catalog.system_full_load_it_w(sysm, catalog.accelerator_for(sysm))
        assert lo <= w <= hi, (key, w)


def test_roadmap_parts_are_labelled() -> None:
    assert catalog.ACCELERATORS["trainium4"].roadmap and catalog.SYSTEMS["trn4-ultra"].roadmap
    assert "projection" in catalog.ACCELERATORS["trainium4"].name
    t3, t4 = catalog.accelerator("trainium3"), catalog.accelerator("trainium4")
    assert t4.peak("fp8") == pytest.approx(3 * t3.peak("fp8"))  # "3x FP8 compute"
    assert t4.peak("fp4") == pytest.approx(6 * t3.peak("fp4"))  # ">= 6x FP4 compute"
    assert t4.hbm_bw_bytes_s == pytest.approx(4 * t3.hbm_bw_bytes_s)  # "4x memory bandwidth"
    # "2x HBM capacity" as the announcement is reported, carried with its doubt.
    assert t4.hbm_bytes == pytest.approx(2 * 144 * GIB)
    assert catalog.ACCELERATORS["trainium4"].sources["hbm"].startswith("OFF-2")
    assert "doubtful" in catalog.ACCELERATORS["trainium4"].sources["hbm"]


def test_overrides_replace_catalog_values_and_every_entry_is_sourced() -> None:
    acc = catalog.accelerator("trainium3", {"tdp_w": 1100.0})
    assert acc.tdp_w == 1100.0 and catalog.ACCELERATORS["trainium3"].tdp_w == 700.0
    assert acc.tdp_assumed
    for a in catalog.ACCELERATORS.values():
        assert a.sources, a.key
    for s in catalog.SYSTEMS.values():
        assert s.sources and s.accelerator in catalog.ACCELERATORS, s.key


def test_trainium3_tdp_is_the_value_the_efficiency_claim_implies() -> None:
    # AWS: Trainium3 has "40 % better energy efficiency" than Trainium2 (OFF-2). Read as peak FP8
    # per W with Trainium2 at ~500 W: 2,517 / 1,299 / 1.4 x 500 W = 692 W (facts §5: 700-750 W).
    t3, t2 = catalog.ACCELERATORS["trainium3"], catalog.ACCELERATORS["trainium2"]
    implied = t3.peak("fp8") / t2.peak("fp8") / 1.4 * t2.tdp_w
    assert implied == pytest.approx(692.0, abs=1.0)
    assert t3.tdp_w == pytest.approx(implied, rel=0.03)
    assert t3.tdp_assumed and t3.sources["tdp_w"].startswith("DER")
    # Its FP8 per W is then 1.4x Trainium2's, within the rounding.
    assert (t3.peak("fp8") / t3.tdp_w) / (t2.peak("fp8") / t2.tdp_w) == pytest.approx(1.4, rel=0.03)
    # Idle power stays in the 15-25 % of TDP the fact sheet gives (facts §5).
    assert 0.15 <= t3.idle_fraction <= 0.25


@pytest.mark.parametrize("tdp", [700.0, 900.0, 1100.0])
def test_trn3_gen2_full_load_power_across_the_tdp_range(tdp: float) -> None:
    # facts §5: UltraServer IT = 144 chips at TDP + 15-25 % host/switch overhead (~150-165 kW at
    # 900 W). Hosts and switches do not scale with the chip's TDP: their 22 kW are 22 % of the
    # chips' power at 700 W and 14 % at 1,100 W, just below the band.
    sysm = catalog.system("trn3-gen2")
    acc = catalog.accelerator("trainium3", {"tdp_w": tdp})
    chips_w = 144 * tdp
    full = catalog.system_full_load_it_w(sysm, acc)
    assert full - chips_w == pytest.approx(36 * 500 + 4000)
    assert 0.13 <= (full - chips_w) / chips_w <= 0.25
    if tdp == 900.0:
        assert 150e3 <= full <= 165e3
