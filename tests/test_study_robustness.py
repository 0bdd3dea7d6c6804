"""Studies survive failed designs, never lose a recording, and resume exactly.

The references are independent of the code under test: a design with a negative moment
of inertia must fail (no rigid body has one), and a resumed run must retrace the
uninterrupted run of the same deterministic optimiser bit for bit.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from studies import five_bar_design, report_from_db, run_study
from studies.recording import read_evaluations
from workbench.errors import StudyError

T_END = 0.3          # short runs: what is tested is the bookkeeping, not the optimum


def _quiet(*_):
    pass


def _spec_towards_failure():
    """Minimise -psi1 over the planar inertia I3B in (-1, 1): the descent direction leads
    to I3B < 0, where every design fails (negative moment of inertia)."""
    spec = five_bar_design(t_end=T_END)
    spec.parameters, spec.bounds, spec.constraints = ["I3B"], {"I3B": (-1.0, 1.0)}, {}
    spec.objective = {"psi1": -1.0}
    return spec


@pytest.mark.parametrize("optimizer", ["SLSQP", "L-BFGS-B"])
def test_failed_designs_are_recorded_and_the_study_goes_on(tmp_path, optimizer):
    s = run_study(_spec_towards_failure(), optimizer, out=tmp_path, maxiter=8,
                  compare_fd=False, echo=_quiet)
    assert s["status"] == "complete" and s["failed_evaluations"] >= 1
    # the reported design is one that succeeded: physical, inside the bounds
    assert 0.0 <= s["design_final"]["I3B"] <= 1.0
    assert s["objective_final"] <= s["objective_initial"]
    rows = read_evaluations(tmp_path / "five-bar-design" / "cases.db")
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == s["failed_evaluations"]
    assert all("negative moment of inertia" in r["reason"] and r["design"]["I3B"] < 0
               for r in failed)
    assert all(r["design"]["I3B"] >= 0 for r in rows if r["status"] == "ok")
    text = (tmp_path / "five-bar-design" / "report.md").read_text()
    assert "failed designs: " in text


def test_an_existing_recording_is_never_replaced_without_asking(tmp_path):
    spec = five_bar_design(t_end=T_END)
    run_study(spec, "SLSQP", out=tmp_path, maxiter=2, compare_fd=False, echo=_quiet)
    db = tmp_path / "five-bar-design" / "cases.db"
    before = db.read_bytes()
    with pytest.raises(StudyError, match="--resume .* --overwrite"):
        run_study(spec, "SLSQP", out=tmp_path, maxiter=2, compare_fd=False, echo=_quiet)
    assert db.read_bytes() == before
    s = run_study(spec, "SLSQP", out=tmp_path, maxiter=2, compare_fd=False, echo=_quiet,
                  existing="overwrite")
    assert s["status"] == "complete"


def test_bad_bounds_and_options_are_refused_before_any_work(tmp_path):
    spec = five_bar_design(t_end=T_END)
    spec.bounds = dict(spec.bounds, Ls1=(3.5, 1.5))
    with pytest.raises(StudyError, match="lower bound of 'Ls1'"):
        run_study(spec, "SLSQP", out=tmp_path, echo=_quiet)
    spec = five_bar_design(t_end=T_END)
    spec.dt = 0.0
    with pytest.raises(StudyError, match="dt must be a positive"):
        run_study(spec, "SLSQP", out=tmp_path, echo=_quiet)
    with pytest.raises(StudyError, match="maxiter"):
        run_study(five_bar_design(t_end=T_END), "SLSQP", out=tmp_path, maxiter=0,
                  echo=_quiet)
    assert list(tmp_path.iterdir()) == []


def _interrupt_after(n):
    seen = {"k": 0}

    def echo(line):
        if line.startswith("  evaluation"):
            seen["k"] += 1
            if seen["k"] == n:
                raise KeyboardInterrupt
    return echo


def test_interrupted_study_is_reportable_and_resumes_to_the_same_optimum(tmp_path):
    spec = five_bar_design(t_end=T_END)
    full = run_study(spec, "SLSQP", out=tmp_path / "a", maxiter=30, compare_fd=False,
                     echo=_quiet)
    with pytest.raises(KeyboardInterrupt):
        run_study(spec, "SLSQP", out=tmp_path / "b", maxiter=30, compare_fd=False,
                  echo=_interrupt_after(4))
    d = tmp_path / "b" / "five-bar-design"
    text = (d / "report.md").read_text()
    assert "INTERRUPTED" in text and "best so far" in text
    resumed = run_study(spec, "SLSQP", out=tmp_path / "b", maxiter=30, compare_fd=False,
                        echo=_quiet, existing="resume")
    # deterministic optimiser + replayed values: the same path, bit for bit
    assert resumed["design_final"] == full["design_final"]
    assert resumed["objective_final"] == full["objective_final"]
    assert resumed["iterations"] == full["iterations"]
    assert (d / "cases.interrupted-1.db").exists()           # kept, not deleted
    assert any(r["replayed"] for r in read_evaluations(d / "cases.db"))


def test_resume_refuses_a_different_study(tmp_path):
    spec = five_bar_design(t_end=T_END)
    with pytest.raises(KeyboardInterrupt):
        run_study(spec, "SLSQP", out=tmp_path, maxiter=30, compare_fd=False,
                  echo=_interrupt_after(2))
    with pytest.raises(StudyError, match="differs in maxiter"):
        run_study(spec, "SLSQP", out=tmp_path, maxiter=31, compare_fd=False, echo=_quiet,
                  existing="resume")


KILLED_RUN = """
import sys
from studies import five_bar_design, run_study
spec = five_bar_design(t_end={t_end})
run_study(spec, "SLSQP", out=sys.argv[1], maxiter=30, compare_fd=False,
          echo=lambda s: print(s, flush=True))
"""


def test_a_study_killed_with_sigkill_is_reportable_and_resumable(tmp_path):
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN.format(t_end=T_END), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    db = out / "five-bar-design" / "cases.db"
    deadline = time.time() + 600
    try:
        # kill -9 once three evaluations are committed
        while time.time() < deadline:
            if db.exists():
                try:
                    if sum(r["kind"] == "value" for r in read_evaluations(db)) >= 3:
                        break
                except sqlite3.OperationalError:
                    pass
            if proc.poll() is not None:
                pytest.fail("the study finished before it could be killed:\n"
                            + proc.stdout.read())
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    report_from_db(db, echo=_quiet)
    text = (db.parent / "report.md").read_text()
    assert "RUNNING" in text and "best so far" in text
    spec = five_bar_design(t_end=T_END)
    resumed = run_study(spec, "SLSQP", out=out, maxiter=30, compare_fd=False, echo=_quiet,
                        existing="resume")
    full = run_study(spec, "SLSQP", out=tmp_path / "full", maxiter=30, compare_fd=False,
                     echo=_quiet)
    assert resumed["design_final"] == full["design_final"]
    summary = json.loads((db.parent / "summary.json").read_text())
    assert summary["status"] == "complete"


def test_multistart_refuses_existing_recordings_before_starting_dask(tmp_path):
    from studies.multistart import run_multistart
    taken = tmp_path / "five-bar-design" / "start-1"
    taken.mkdir(parents=True)
    (taken / "cases.db").write_bytes(b"recorded")
    with pytest.raises(StudyError, match=r"starts \[1\]"):
        run_multistart("five-bar-design", "SLSQP", 2, workers=1, out=tmp_path, maxiter=2,
                       echo=_quiet, t_end=T_END)
    with pytest.raises(StudyError, match="workers"):
        run_multistart("five-bar-design", "SLSQP", 2, workers=0, out=tmp_path, maxiter=2,
                       echo=_quiet, t_end=T_END)
    assert (taken / "cases.db").read_bytes() == b"recorded"
    assert sorted(p.name for p in (tmp_path / "five-bar-design").iterdir()) == ["start-1"]


def test_a_study_whose_starting_design_fails_reports_and_stops(tmp_path):
    """StudyError naming the starting design, and the report of what was recorded."""
    spec = _spec_towards_failure()
    with pytest.raises(StudyError, match="starting design .* fails"):
        run_study(spec, "SLSQP", out=tmp_path, x0={"I3B": -0.5}, echo=_quiet)
    text = (tmp_path / "five-bar-design" / "report.md").read_text()
    assert "FAILED" in text and "negative moment of inertia" in text


def test_ctrl_c_on_the_command_line_stops_with_130_and_a_reportable_recording(tmp_path):
    """SIGINT to `workbench study`: exit status 130, one error line, the report of the
    interrupted run written; `--resume` then finishes it (the same optimum as an
    uninterrupted run is the claim of the tests above)."""
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "workbench.apps.cli", "study", "five-bar-design", "--t-end",
           str(T_END), "--maxiter", "30", "--no-fd-comparison", "--out", str(out)]
    # the kernels the study uses compiled and cached first (a fresh checkout compiles them
    # inside the child otherwise, and the run to interrupt should be the study itself)
    warm_cmd = cmd[:cmd.index("--maxiter")] + ["--maxiter", "1", "--no-fd-comparison",
                                               "--out", str(tmp_path / "warm")]
    warm = subprocess.run(warm_cmd, capture_output=True, text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr
    # SIGINT at its default in the child: a runner that ignores it (a background job of a
    # shell without job control) would otherwise pass SIG_IGN on, and Python installs no
    # KeyboardInterrupt handler over an ignored signal
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    db = out / "five-bar-design" / "cases.db"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        try:
            if db.exists() and sum(r["kind"] == "value" for r in read_evaluations(db)) >= 2:
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail("the study finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "error: interrupted" and "Traceback" not in err
    text = (db.parent / "report.md").read_text()
    assert "INTERRUPTED" in text
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads((db.parent / "summary.json").read_text())["status"] == "complete"
