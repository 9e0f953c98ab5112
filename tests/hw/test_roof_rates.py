"""``roof`` builds a systolic design's energy rates once for its idle power and its peak
efficiency (issue 30 follow-up), and gives what the two functions give separately."""

from __future__ import annotations

import math

import pytest

import asicsim._src.hw.pricing as pricing
from asicsim._src.hw.design_files import load_design
from asicsim._src.hw.efficiency import idle_power, peak_tops_per_w, power_figures
from asicsim._src.hw.interface import roof


@pytest.mark.parametrize("name", ["tpu_v1", "dc_bf16_128x128", "gpu_h100"])
def test_roof_builds_the_energy_rates_once(monkeypatch, name):
    d = load_design(name)
    calls = []
    real = pricing.energy_rates

    def counted(*a, **k):
        calls.append(a[0].name)
        return real(*a, **k)

    monkeypatch.setattr(pricing, "energy_rates", counted)
    r = roof(d)
    assert len(calls) == (1 if d.kind == "systolic" else 0)
    monkeypatch.setattr(pricing, "energy_rates", real)
    idle = idle_power(d)
    assert r["idle_power_chip_w"] == idle["chip"] and r["idle_power_board_w"] == idle["board"]
    assert r["peak_flops_per_w_board"] == pytest.approx(peak_tops_per_w(d)["board"] * 1e12, rel=1e-12)


def test_power_figures_without_the_formats_keeps_the_idle_power():
    """A design asked for formats it does not execute: the idle power stands, no peak (NaN in roof)."""
    d = load_design("tpu_v1")  # an int8 array: no fp32 MACs
    idle, peak = power_figures(d, "act=fp32,weight=fp32,acc=fp32")
    assert peak is None and idle == idle_power(d, "act=fp32,weight=fp32,acc=fp32")
    assert math.isnan(roof(d, "act=fp32,weight=fp32,acc=fp32")["peak_flops_per_w_board"])
