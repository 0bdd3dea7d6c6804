"""The seed 000 tutorial script runs and its checks hold (each is an assertion inside the
script: V of the seed's explicit columns = the workbench's recursion, C_q V = 0 with the
seed's eq 5, V = D T R_d, SR-I = SR-II mass matrix and forces, the seed's block pattern of
the quick-return V, multipliers = Matrix-R accelerations)."""

from __future__ import annotations

import runpy
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "tutorial" / "tutorial_semirecursive.py"


def test_the_tutorial_script_runs_and_every_check_holds(tmp_path, capsys):
    mod = runpy.run_path(str(SCRIPT))
    mod["main"]([str(tmp_path)])
    out = capsys.readouterr().out
    assert out.rstrip().endswith("all checks passed")
    for claim in ("C_q V = 0", "V = D T R_d", "same M and tau", "seed's table", "C_q H = 0"):
        assert claim in out, claim
    png = tmp_path / "quick_return_tutorial.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
