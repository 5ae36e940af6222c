"""`feedback.evaluate`'s command line: a bad flag value is one line (nothing is evaluated)."""

from __future__ import annotations

import pytest

from feedback.evaluate import main


@pytest.mark.parametrize("args, needles", [
    (["--backend", "gpu"], ["--backend", "'cuda', 'triton', 'cpp'"]),
    (["--backend", "cpp", "--tolerance", "loose"], ["--tolerance", "'kernelbench'"]),
    (["--backend", "cpp", "--timing-trials", "0"], ["--timing-trials 0", "greater than"]),
    (["--backend", "cpp", "--device", "gpu0"], ["--device must be cuda:N"]),
])
def test_a_bad_flag_value_is_one_line(args, needles, tmp_path, capsys):
    candidate = tmp_path / "candidate.py"
    candidate.write_text("class ModelNew: pass\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["suite:level1/19", str(candidate), *args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "pydantic" not in err
    assert all(n in err for n in needles), err
