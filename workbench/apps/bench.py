"""Benchmarks (measured, never asserted): the cost of a gradient relative to the simulation.

``workbench bench sensitivity`` measures, in one run and after a warm-up that compiles
every kernel and makes three full-length calls of each gradient (the steady state of
an optimiser's repeated calls):

* the five-bar (shipped model, its 5 design parameters, psi1-psi3): simulation alone,
  direct gradient, adjoint gradient and central differences (each gradient timing
  includes its own forward simulation, i.e. it is what a user waits for; the targets
  compare these totals), and the simulation's real-time factor;
* a generated planar chain closed by a rod (10 links, 9 degrees of freedom) whose links
  carry 5 parameters each (mass, centre of mass, inertia, joint stiffness and damping):
  the same four timings with p = 5 and p = 50 parameters.

The gradients evaluate the step Jacobians along the trajectory on all the threads numba
has (``numba.get_num_threads()``, the machine's cores): they are independent from step to
step, so a second thread evaluates those of the rows the simulation has finished while it
runs (pipelined; the direct recursion follows them, the adjoint recursion runs backward
at the end).  The same gradients on one thread are measured in the same run: both are
reported, the one-thread figures being the single-core cost.  Each timing is the median
of ``repeat`` runs (the shared machine's timings vary by ~20 %).  For information, every row also
gives each method's sweep alone, given
a simulation that kept its states (what a gradient costs when the simulation has already
run, as in an OpenMDAO ``compute`` followed by ``compute_partials``).

Every figure is reported as a ratio to the simulation of the same model measured in the
same run; the targets of issue 29 (one thread: adjoint <= 2x the simulation for any p,
direct <= (1 + 0.1 p)x; issue 3 had 1 + 0.3 p) and the five-bar's >= 50x real time are
printed beside them, with no claim that they are met.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench.integrators.simulation import simulate
from workbench.model import catalog
from workbench.model.builder import Model
from workbench.model.elements import GROUND
from workbench.objectives import coordinate, point_position
from workbench.sensitivities.driver import sensitivity


@dataclass
class BenchRow:
    """One benchmark case: wall times (s) and ratios to the simulation."""

    case: str
    n_parameters: int
    t_end: float
    dt: float
    simulation_s: float
    direct_s: float
    adjoint_s: float
    fd_s: float
    direct_sweep_s: float
    adjoint_sweep_s: float
    threads: int
    direct_1thread_s: float
    adjoint_1thread_s: float
    pipelined: bool

    @property
    def ratios(self) -> dict:
        s = self.simulation_s
        return {"direct": self.direct_s / s, "adjoint": self.adjoint_s / s,
                "fd": self.fd_s / s, "direct_sweep": self.direct_sweep_s / s,
                "adjoint_sweep": self.adjoint_sweep_s / s,
                "direct_1thread": self.direct_1thread_s / s,
                "adjoint_1thread": self.adjoint_1thread_s / s}

    def to_dict(self) -> dict:
        return {**asdict(self), "ratios": self.ratios,
                "target_direct": 1.0 + 0.1 * self.n_parameters, "target_adjoint": 2.0}


def closed_chain(n_links: int = 10) -> Model:
    """A planar chain of ``n_links`` links hanging from a pivot, its tip tied to the ground
    by a rigid rod (one loop, ``n_links - 1`` degrees of freedom), with a spring-damper in
    every joint.  Every link's mass, centre of mass, inertia and joint stiffness/damping is
    a named parameter (``m{i}, xg{i}, I{i}, k{i}, c{i}``): ``5 n_links`` parameters.
    A benchmark model, not a physical reference."""
    L = 0.3
    m = Model(f"closed-chain-{n_links}", gravity=(0.0, -9.81, 0.0), planar=True)
    angles = [0.35 * (-1) ** i for i in range(n_links)]     # zig-zag, clear of singularities
    parent, x, y, th = GROUND, 0.0, 0.0, 0.0
    for i in range(n_links):
        mi = m.parameter(f"m{i}", 1.0 + 0.05 * i, "kg", "benchmark value")
        xg = m.parameter(f"xg{i}", 0.5 * L, "m", "benchmark value")
        Ii = m.parameter(f"I{i}", 1.0 * L * L / 12.0, "kg*m^2", "benchmark value")
        ki = m.parameter(f"k{i}", 300.0 + 10.0 * i, "N*m/rad", "benchmark value")
        ci = m.parameter(f"c{i}", 0.02, "N*m*s/rad", "benchmark value")
        b = f"link{i}"
        m.body(b, mi, com=(xg, 0.0, 0.0), inertia=(0.0, 0.0, Ii),
               points={"tip": (L, 0.0, 0.0)})
        m.revolute(f"j{i}", parent, b, parent_point=(0.0, 0.0, 0.0) if i == 0 else "tip",
                   axis=(0, 0, 1), q0=angles[i])
        m.joint_spring(f"s{i}", f"j{i}", k=ki, c=ci, q0=angles[i])
        th += angles[i]
        x += L * math.cos(th)
        y += L * math.sin(th)
        parent = b
    # the rod from the last tip to a ground point below it closes the loop; the last
    # joint is the dependent coordinate (its column in the rod's row is L cos 0 = L)
    m.point(GROUND, "anchor", (x, y - 0.4, 0.0))
    m.distance("rod", parent, "tip", GROUND, "anchor", 0.4)
    m.dof(*[f"j{i}" for i in range(n_links - 1)])
    return m


def _time(fn, repeat=1):
    """(median wall seconds of ``repeat`` calls of ``fn()``, the result of that call)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - t0, out))
    runs.sort(key=lambda r: r[0])
    return runs[(len(runs) - 1) // 2]


def _case(label, model, objectives, params, t_end, dt, formulation, repeat) -> BenchRow:
    import numba
    cm = model.compile() if isinstance(model, Model) else model
    kw = dict(objectives=objectives, parameters=params, t_end=t_end, dt=dt,
              formulation=formulation)
    threads = numba.get_num_threads()
    # warm-up: compile every kernel (the central-difference path too) on a short run and
    # start the thread pool; then three full-length calls of each gradient, so that the
    # timed calls find the process's heap sized for their arrays, as the repeated calls
    # of an optimiser do (the first few calls of a process touch fresh memory pages,
    # which on this shared virtual machine slowed a pipelined run by up to ~60 %)
    for meth in ("direct", "adjoint", "fd"):
        sensitivity(cm, **{**kw, "t_end": 10 * dt}, method=meth)
    for _ in range(3):
        for meth in ("direct", "adjoint"):
            sensitivity(cm, **kw, method=meth)
    sim_s = _time(lambda: simulate(cm, t_end, dt, formulation), repeat)[0]
    direct_s, direct = _time(lambda: sensitivity(cm, **kw, method="direct"), repeat)
    adjoint_s, adjoint = _time(lambda: sensitivity(cm, **kw, method="adjoint"), repeat)
    direct1_s = _time(lambda: sensitivity(cm, **kw, method="direct", threads=1), repeat)[0]
    adjoint1_s = _time(lambda: sensitivity(cm, **kw, method="adjoint", threads=1), repeat)[0]
    # the sweeps alone: given a simulation that kept its states (nothing to pipeline)
    sim = simulate(cm, t_end, dt, formulation, keep_states=True)
    dsweep_s = _time(lambda: sensitivity(cm, **kw, method="direct", simulation=sim), repeat)[0]
    asweep_s = _time(lambda: sensitivity(cm, **kw, method="adjoint", simulation=sim),
                     repeat)[0]
    fd_s, _ = _time(lambda: sensitivity(cm, **kw, method="fd"))
    return BenchRow(label, len(params), t_end, dt, sim_s, direct_s, adjoint_s, fd_s,
                    dsweep_s, asweep_s, threads, direct1_s, adjoint1_s,
                    bool(direct.timings.get("pipelined")) and bool(adjoint.timings.get("pipelined")))


def bench_sensitivity(t_end: float = 5.0, dt: float = 1e-3, chain_t_end: float = 2.0,
                      formulation: str = "sr-com", out: str | None = None,
                      echo=print, repeat: int = 5) -> list:
    """Run the sensitivity benchmark; returns the rows (and writes ``out/bench.json``)."""
    rows = []
    five = catalog.load("five-bar")
    rows.append(_case("five-bar", five, None, ["Ls1", "Ls2", "mA1", "xA1G", "LA1"], t_end,
                      dt, formulation, repeat))
    chain = closed_chain(10)
    objs = [point_position("tip_y", "link9.tip", "y"), coordinate("swing", "j0")]
    names = [f"{k}{i}" for i in range(10) for k in ("m", "xg", "I", "k", "c")]
    rows.append(_case("closed-chain p=5", chain, objs, names[:5], chain_t_end, dt,
                      formulation, repeat))
    rows.append(_case("closed-chain p=50", chain, objs, names, chain_t_end, dt,
                      formulation, repeat))
    rtf = rows[0].t_end / rows[0].simulation_s
    echo(f"sensitivity benchmark ({formulation}, dt = {dt:g} s), measured in this run; "
         "ratios to the simulation of the same model (each gradient includes its "
         "forward simulation)")
    nt = rows[0].threads
    echo(f"{'':30s} {'-- ' + str(nt) + ' threads --':>17s} {'-- 1 thread --':>17s}")
    echo(f"{'case':20s} {'p':>3s} {'sim [s]':>6s} {'direct':>8s} {'adjoint':>8s} "
         f"{'direct':>8s} {'adjoint':>8s} {'fd':>8s}   targets (issue 29, one thread): direct <= 1+0.1p, "
         f"adjoint <= 2   (sweeps alone, {nt} threads: direct, adjoint)")
    for r in rows:
        q = r.ratios
        echo(f"{r.case:20s} {r.n_parameters:3d} {r.simulation_s:6.3f} {q['direct']:7.2f}x "
             f"{q['adjoint']:7.2f}x {q['direct_1thread']:7.2f}x {q['adjoint_1thread']:7.2f}x "
             f"{q['fd']:7.2f}x   ({1 + 0.1 * r.n_parameters:.1f}, 2.0)"
             f"{'':29s}({q['direct_sweep']:.2f}x, {q['adjoint_sweep']:.2f}x)")
    echo(f"{nt} threads: the step Jacobians evaluated beside the running simulation "
         f"(pipelined: {'yes' if all(r.pipelined for r in rows) else 'no'}); 1 thread: "
         "after it, on the simulation's core")
    echo(f"five-bar simulation: {rtf:.1f}x faster than real time (target >= 50)")
    if out is not None:
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        (path / "bench.json").write_text(json.dumps(
            {"formulation": formulation, "five_bar_real_time_factor": rtf,
             "rows": [r.to_dict() for r in rows]}, indent=2))
    return rows
