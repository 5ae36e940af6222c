"""The timing-stability script's own logic (its GPU run is recorded in docs/gpu-validation.md)."""

from __future__ import annotations

import argparse

import pytest

from experiments.bench.timing_stability import main, parse_variant, spread


def test_variants_parse_into_option_overrides():
    assert parse_variant("nosettle:settle_ms=0,input_sets=1") == (
        "nosettle", {"settle_ms": "0", "input_sets": "1"})
    assert parse_variant("defaults") == ("defaults", {})
    with pytest.raises(argparse.ArgumentTypeError, match="not KEY=VALUE"):
        parse_variant("bad:settle_ms")


def test_spread_is_max_over_min_of_the_medians():
    assert spread([1.0, 1.015, 1.01]) == pytest.approx(0.015)
    assert spread([2.0]) is None


def test_an_unknown_option_is_a_clear_error(capsys):
    assert main(["suite:level1/19", __file__, "--variant", "x:no_such_option=1"]) == 2
    assert "no_such_option" in capsys.readouterr().err
