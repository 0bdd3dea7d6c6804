"""``workbench warm``: compile the numerical kernels into numba's on-disk cache ahead of use,
on every core at once.

numba compiles a kernel the first time it is called with a new combination of argument
types, in the calling process and on one core; the result is cached on disk beside the
sources (``__pycache__``) and later processes load it in milliseconds.  A fresh install
therefore pays the whole compilation on its first simulation and its first gradient
(minutes on a 2-core machine).  This command runs short workloads that call every kernel
family with the argument types of the real runs (each formulation's simulation and
gradients, the tires, rods, RK4, statics), split into groups whose kernels barely overlap,
and runs the groups in parallel worker processes: the compilation is the same work, spread
over the cores, done once at install time.  It writes nothing but the cache.

The groups are run by a process pool (``jobs`` workers, default: the cores); each worker
reports the kernels it compiled and the time it took.  A group that fails raises (a bug to
report), after the others have finished.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

#: short runs: long enough to take every branch of a step (Newton iterations, dense output
#: rows), short enough that the run itself is negligible next to the compilation
_T = 0.01
_DT = 1e-3


def _sr():
    """Semi-recursive formulations (both reference points): simulation, direct and adjoint
    gradients (both variants), central differences, statics."""
    import workbench as wb
    from workbench.statics import equilibrium
    for form in ("sr-com", "sr-origin"):
        wb.simulate("five-bar", t_end=_T, dt=_DT, formulation=form)
        for method in ("direct", "adjoint"):
            wb.sensitivity("five-bar", method=method, formulation=form, t_end=_T, dt=_DT)
    wb.sensitivity("five-bar", method="adjoint", variant="continuous", t_end=_T, dt=_DT)
    wb.sensitivity("five-bar", method="fd", t_end=_T, dt=_DT)
    equilibrium("five-bar")


def _vehicle():
    """Vehicles: Magic Formula and disc tires, anti-roll bars, speed control, path
    follower, rods (RK4 and trapezoidal)."""
    import workbench as wb
    wb.simulate("buggy-dlc", t_end=_T, dt=_DT)
    wb.sensitivity("buggy-dlc", method="adjoint", t_end=_T, dt=_DT)
    wb.sensitivity("buggy-dlc", method="direct", t_end=_T, dt=_DT)
    wb.simulate("buggy-step", t_end=_T, dt=_DT)
    wb.simulate("sedan-sine-slalom", t_end=_T, dt=_DT)
    wb.simulate("sedan-sine-slalom", t_end=_T, dt=_DT, integrator="rk4",
                rods={"mode": "partitioned"})


def _global():
    """The global formulations in natural coordinates: simulation and gradients."""
    import workbench as wb
    for form in ("global", "global-partitioned"):
        wb.simulate("five-bar", t_end=_T, dt=_DT, formulation=form)
        for method in ("direct", "adjoint"):
            wb.sensitivity("five-bar", method=method, formulation=form, t_end=_T, dt=_DT)


def _multipliers_penalty():
    """Multipliers with Baumgarte (simulation) and penalty (simulation and gradients)."""
    import workbench as wb
    for form in ("multipliers", "multipliers-origin", "penalty"):
        wb.simulate("five-bar", t_end=_T, dt=_DT, formulation=form)
    for method in ("direct", "adjoint"):
        wb.sensitivity("five-bar", method=method, formulation="penalty", t_end=_T, dt=_DT)


def _rcr_rk4():
    """Recursive coordinate reduction (simulation and gradient) and RK4."""
    import workbench as wb
    wb.simulate("five-bar", t_end=_T, dt=_DT, formulation="rcr")
    wb.sensitivity("five-bar", method="adjoint", formulation="rcr", t_end=_T, dt=_DT)
    wb.simulate("five-bar", t_end=_T, dt=_DT, integrator="rk4")


def _reverse():
    """The discrete adjoint by reverse-mode step products (an open tree: the pendulum)."""
    import workbench as wb
    from workbench import objectives as O
    wb.sensitivity("pendulum", objectives=[O.coordinate("angle", "pivot")],
                   parameters=["m", "L"], method="adjoint", products="reverse", t_end=_T, dt=_DT)


#: (label, function): the groups in the order the pool hands them out (a worker takes the
#: next group when it finishes one).  The semi-recursive group is the longest; the global
#: one shares almost no kernel with it, so the two start together; the vehicles come last,
#: when the semi-recursive simulation and step-Jacobian kernels (which the tires' runs
#: reuse) are in the cache rather than being compiled a second time beside them.
#: Cold-cache CI runs on 2 cores, 2026-11-26: semi-recursive 638 s, global 221 s,
#: multipliers + penalty + rcr 733 s, vehicles 24 s (loaded machine); then, with that group
#: split: semi-recursive 361 s, global 164 s, multipliers + penalty 191 s, rcr + RK4 293 s,
#: vehicles 11 s, 655 s in all (the second worker took rcr after the semi-recursive group);
#: rcr now follows the global group on the second worker.  The reverse products (2026-11-28)
#: come last: they reuse the semi-recursive kinematics kernels.
GROUPS = (("semi-recursive", _sr), ("global", _global), ("rcr, RK4", _rcr_rk4),
          ("multipliers, penalty", _multipliers_penalty), ("vehicles", _vehicle),
          ("reverse products", _reverse))


@dataclass
class WarmResult:
    """What one group compiled: ``kernels`` specialisations in ``compile_s`` seconds of a
    run of ``wall_s`` seconds."""

    group: str
    kernels: int
    compile_s: float
    wall_s: float


def _run_group(i: int) -> WarmResult:
    from numba.core import event

    label, fn = GROUPS[i]
    counter = event.TimingListener()
    n = [0]

    class _Count(event.Listener):
        def on_start(self, ev):
            n[0] += 1

        def on_end(self, ev):
            pass

    t0 = time.perf_counter()
    with event.install_listener("numba:compile", counter), \
            event.install_listener("numba:compile", _Count()):
        fn()
    wall = time.perf_counter() - t0
    return WarmResult(label, n[0], counter.duration if counter.done else 0.0, wall)


def warm(jobs: int | None = None, echo=print) -> list:
    """Compile the kernels of every group into the on-disk cache with ``jobs`` worker
    processes (default: the cores); returns the :class:`WarmResult` of each group."""
    import multiprocessing as mp

    from tqdm import tqdm

    jobs = max(1, int(jobs or os.cpu_count() or 1))
    t0 = time.perf_counter()
    results, errors = [], []
    ctx = mp.get_context("spawn")
    echo(f"compiling the numerical kernels into numba's cache ({len(GROUPS)} groups, "
         f"{jobs} worker process{'es' if jobs > 1 else ''}) ...")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futs = {pool.submit(_run_group, i): GROUPS[i][0] for i in range(len(GROUPS))}
        with tqdm(total=len(futs), unit="group", file=sys.stderr, disable=None) as bar:
            for f in as_completed(futs):
                try:
                    results.append(f.result())
                except Exception as exc:                      # noqa: BLE001 - reported below
                    errors.append((futs[f], exc))
                bar.update(1)
    for r in sorted(results, key=lambda r: [g for g, _ in GROUPS].index(r.group)):
        echo(f"  {r.group:28s} {r.kernels:4d} kernel specialisations compiled, "
             f"{r.compile_s:6.1f} s compiling ({r.wall_s:.1f} s in all)")
    echo(f"done in {time.perf_counter() - t0:.1f} s: later runs load the kernels from the "
         "cache")
    if errors:
        from workbench.errors import WorkbenchError
        label, exc = errors[0]
        raise WorkbenchError(f"warm: group {label!r} failed: {type(exc).__name__}: {exc}")
    return results
