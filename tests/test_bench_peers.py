"""``workbench bench peers --quick`` (issue 29 item 6): the workbench rows are measured with
or without the optional peers, and the JAX peer integrates the same trajectory.

Timings are measured, never asserted (a shared machine); only that every workbench figure
is a finite positive number, that a missing peer is reported rather than raised, and that
the peers agree with us where they compute the same thing.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from workbench import simulate
from workbench.apps.peers_bench import NOT_INSTALLED, bench_peers, chain_data, open_chain

#: JAX solves the same trapezoidal equations (same ODE in closed form, Newton on the new
#: accelerations, 2 iterations: converged to rounding); ours stops Newton at the residual
#: tolerance 1e-10 (NEWTON_TOL).  The two trajectories then differ by rounding and by that
#: stopping test only: measured 3.5e-12 rad over the quick run's 200 steps (1.2e-11 over
#: 1000 steps), so 1e-9 rad leaves a 300x margin and still fails on any modelling
#: difference: over the same 0.2 s, g = 9.80 instead of 9.81 moves q by 3e-4 rad, Izz 1 %
#: larger by 2e-3 rad, the centre of mass 1 mm further by 9e-4 rad (measured 2026-11-26).
JAX_Q_TOL = 1e-9
#: the same for the gradient dJ/dp (relative to its largest entry): measured 2e-11
JAX_GRAD_TOL = 1e-8


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("peers")
    lines = []
    rows = bench_peers(quick=True, out=out, echo=lines.append, repeat=1)
    return rows, out, lines


def test_workbench_rows_are_finite_and_positive(quick):
    rows, out, lines = quick
    assert len(rows) >= 7
    for r in rows:
        assert math.isfinite(r.workbench) and r.workbench > 0, r
        assert r.workbench_runs and all(x > 0 for x in r.workbench_runs), r
        if r.status == "measured":
            assert math.isfinite(r.peer_value) and r.peer_value > 0, r
        else:                              # not installed, failed, or the published figure
            assert r.status in (NOT_INSTALLED, "published") or r.status.startswith("failed")
    assert not [r for r in rows if r.status.startswith("failed")], \
        [r.status for r in rows if r.status.startswith("failed")]
    # the published MBSLIM figure is labelled as such, with its source
    buggy = [r for r in rows if r.case.startswith("buggy")]
    assert buggy and buggy[0].status == "published" and "seed 001" in buggy[0].comparison
    data = json.loads((out / "peers.json").read_text())
    assert len(data["rows"]) == len(rows)
    md = (out / "peers.md").read_text()
    assert md.count("\n| ") == len(rows) + 1          # header + one line per row
    assert len(lines) == len(rows) + 1                # one echo per row + "wrote ..."


def test_jax_trajectory_and_gradient_equal_ours(quick):
    pytest.importorskip("jax")
    rows, _, _ = quick
    fwd = [r for r in rows if r.peer.startswith("JAX") and r.quantity == "forward"]
    grad = [r for r in rows if r.peer.startswith("JAX") and r.quantity.startswith("reverse")]
    assert fwd and grad and fwd[0].status == "measured", fwd
    assert fwd[0].difference < JAX_Q_TOL, fwd[0].comparison
    assert grad[0].difference < JAX_GRAD_TOL, grad[0].comparison


def test_pinocchio_accelerations_equal_ours(quick):
    """Pinocchio's ABA on our states gives our accelerations: the same chain.  Ours are the
    converged Newton iterate (tolerance 1e-10 on the residual), so they agree to ~1e-10
    relative (measured 3.4e-8 rad/s^2 on |qdd| up to 487 rad/s^2)."""
    pytest.importorskip("pinocchio")
    rows, _, _ = quick
    pin = [r for r in rows if r.peer.startswith("Pinocchio")]
    assert pin and pin[0].status == "measured"
    d = chain_data(5)
    sim = simulate(open_chain(5).compile(), 0.2, 1e-3)
    assert pin[0].difference < 1e-8 * np.max(np.abs(sim.zdd)) + 1e-12, pin[0].comparison
    assert len(d.names) == 15


def test_mujoco_closed_chain_drift_is_reported(quick):
    """MuJoCo closes the loop softly: its drift is reported (positive, small against the
    0.4 m rod), never zero like our exact closure."""
    pytest.importorskip("mujoco")
    rows, _, _ = quick
    mj = [r for r in rows if r.peer.startswith("MuJoCo")]
    assert len(mj) == 2 and all(r.status == "measured" for r in mj), mj
    for r in mj:
        assert 0.0 < r.difference < 0.04, r.comparison
        assert "drift" in r.comparison


def test_missing_peers_are_reported(monkeypatch, tmp_path):
    """With no peer importable the workbench side still runs and each peer row says
    'not installed'."""
    import workbench.apps.peers_bench as PB
    monkeypatch.setattr(PB, "_import", lambda name: None)
    monkeypatch.setattr(PB, "_import_jax", lambda: (None, None, NOT_INSTALLED))
    monkeypatch.setattr(PB, "_buggy_rows", lambda T, repeat, echo: [])   # covered above
    rows = PB.bench_peers(quick=True, out=None, echo=lambda s: None, repeat=1)
    assert rows
    for r in rows:
        assert math.isfinite(r.workbench) and r.workbench > 0
        assert r.status == NOT_INSTALLED and not math.isfinite(r.peer_value)


def test_cli_bench_peers_rejects_bad_input(capsys, tmp_path):
    """Bad input: one `error:` line, exit status 2, no traceback, before any measurement."""
    from workbench.apps.cli import main
    assert main(["bench", "sensitivity", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "--quick belongs to 'workbench bench peers'" in err and "Traceback" not in err
    afile = tmp_path / "afile"
    afile.write_text("")
    t0 = time.perf_counter()
    assert main(["bench", "peers", "--quick", "--out", str(afile)]) == 2
    assert time.perf_counter() - t0 < 5.0                 # failed before measuring
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:                # argparse's own usage error
        main(["bench", "peers", "--repeat", "0"])
    assert exc.value.code == 2
    assert "expected a positive integer" in capsys.readouterr().err
