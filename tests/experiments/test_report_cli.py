"""`experiments.report` reports a user's mistake in one line."""

from __future__ import annotations

import pytest

from experiments.report import main


@pytest.mark.parametrize("args, needle", [
    (["NOWHERE", "--out", "OUT"], "is not a run directory"),
    (["NOWHERE", "--out", "OUT", "--resamples", "0"], "--resamples: must be at least 1"),
    (["NOWHERE", "--out", "OUT", "--seed", "x"], "--seed: invalid int value: 'x'"),
])
def test_a_mistake_is_one_line(args, needle, tmp_path, capsys):
    args = [str(tmp_path / a) if a.isupper() else a for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and needle in err
    assert not (tmp_path / "OUT").exists()
