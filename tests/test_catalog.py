"""Catalog figures reproduced from per-chip numbers against published per-system totals."""

from __future__ import annotations

import pytest

from twin import catalog

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


def test_overrides_replace_catalog_values_and_every_entry_is_sourced() -> None:
    acc = catalog.accelerator("trainium3", {"tdp_w": 1100.0})
    assert acc.tdp_w == 1100.0 and catalog.ACCELERATORS["trainium3"].tdp_w == 900.0
    assert acc.tdp_assumed
    for a in catalog.ACCELERATORS.values():
        assert a.sources, a.key
    for s in catalog.SYSTEMS.values():
        assert s.sources and s.accelerator in catalog.ACCELERATORS, s.key


def test_trn3_gen2_full_load_power_in_the_estimated_band() -> None:
    # facts §5: 144 x 0.9 kW chips + 15-25 % host/switch overhead => ~150-165 kW per UltraServer.
    sysm = catalog.system("trn3-gen2")
    acc = catalog.accelerator("trainium3")
    assert 150e3 <= catalog.system_full_load_it_w(sysm, acc) <= 165e3
