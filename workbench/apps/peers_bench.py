"""Side-by-side benchmark against peer systems (issue 29 item 6): ``workbench bench peers``.

One run measures the workbench and, when they are importable, three peers on identical
models, and writes ``peers.json`` and ``peers.md`` (see ``docs/bench-peers.md``):

* **open planar chain**, ``n = 5`` (``p = 15``) and ``n = 20`` (``p = 60``): the
  per-link mass, joint stiffness and joint damping are the design parameters
  (:func:`open_chain`), 1000 trapezoidal steps of ``h = 1 ms``, objective
  ``J = int sum_i q_i^2 dt``.  Workbench forward (:func:`workbench.simulate`) and adjoint
  gradient (:func:`workbench.sensitivity`, its own forward run included) against **JAX**:
  the same ODE (closed-form planar-chain mass matrix), the same trapezoidal rule solved
  by Newton on the new accelerations (2 iterations from the previous acceleration), one
  ``jax.lax.scan``, ``jax.jit``; forward and ``jax.grad``.  Compared: the joint
  coordinates of every row and the gradient.  A further row times the same adjoint with
  ``products="reverse"`` (no step Jacobians; its gradient compared with the other's).
* **adjoint sweep per step** (the sweep alone, given a run that kept its states) against
  **Pinocchio** ``computeABADerivatives`` called once per step along our trajectory
  (a Python loop over the rows; the same chain built with ``pin.Model``): compared, the
  accelerations ``aba(q, v, tau)`` with ``tau = -k q - c v`` against ours on every row.
* **forward step against a Pinocchio-ABA trapezoidal step** (issue 29 item 2), the same
  chains: our simulation per step beside an ESTIMATE of a trapezoidal step built on
  Pinocchio, as many ``aba`` calls as our Newton evaluations per step plus one
  ``computeABADerivatives`` (the step's Newton matrix, as our modified Newton forms one),
  each timed per call from a Python loop over our rows (binding overhead included, the
  ``d x d`` solve not counted).
* **10-link closed chain** (:func:`workbench.apps.bench.closed_chain`, exact closure by
  a rigid rod) forward per step against **MuJoCo** ``implicit`` and ``implicitfast``
  on the same chain closed by a tendon equality constraint (the rod: a spatial tendon
  between the last tip and the ground anchor whose length is held at 0.4 m; default
  ``solref``/``solimp``, so the closure is soft), timed with ``mujoco.rollout`` (C loop,
  one ``MjData``, one thread).  Compared: its loop drift ``max |l_rod - 0.4|`` and its
  joint angles against ours.
* **buggy double lane change**, 12 s at h = 15 ms: the real-time factor of dynamics +
  adjoint gradient on one core, beside the PUBLISHED figure of MBSLIM (seed 001, 3.1;
  another machine and the official vehicle, labelled as such).

Timings: after a warm-up (numba and XLA compilation excluded), each case runs its
workbench and peer callables alternately ``repeat`` times and reports the medians.  One
core: numba runs on one thread (``numba.set_num_threads(1)`` for the run, restored after,
and ``threads=1`` for the sensitivities), ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` is set before jax is imported (when it was not imported
already; the row says so), MuJoCo's rollout gets one ``MjData`` (one thread), Pinocchio is
single-threaded; every figure also records the process CPU time / wall time of its runs
(about 1: one busy core).  A peer that is not importable is reported as ``not installed
(pip install workbench[peers])``; one that fails is reported with its error.  Measured,
never asserted (``tests/test_bench_peers.py`` checks that the figures are finite and that
the peers compute what we compute: the JAX trajectory and gradient, Pinocchio's
accelerations, MuJoCo's reported drift).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from workbench import GROUND, Model
from workbench import __version__ as _wb_version
from workbench import objectives, sensitivity, simulate
from workbench.apps.bench import closed_chain
from workbench.apps.site import cpu_name

NOT_INSTALLED = "not installed (pip install workbench[peers])"
#: XLA flags for one core, set before jax is imported
XLA_ONE_CORE = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
#: Newton iterations per trapezoidal step of the JAX peer, from the previous acceleration
#: (a fixed count: jit and grad need one).  Two are the fewest that converge: the
#: trajectory after 2 and after 4 iterations differ by 3e-15 rad (n = 5) and 1.8e-12 rad
#: (n = 20, 1000 steps; 3 vs 4: 1.5e-12), the gradients by 1.3e-14 and 2.7e-11 relative
#: (measured 2026-11-26), so a third iteration would only slow the peer down
JAX_NEWTON = 2
#: seed 001 (Lopez Varela, Dopico, Luaces, Computers and Structures 308 (2025) 107642),
#: section 4.2, text of Fig. 5: dynamics + sensitivities of the double lane change run
#: 3.1 times faster than real time with the semi-recursive formulation (MBSLIM, Fortran,
#: Intel i7-8700, the official buggy at h = 15 ms)
MBSLIM_DLC_RTF = 3.1
MBSLIM_SOURCE = ("published: seed 001 (Lopez Varela, Dopico, Luaces, Computers and "
                 "Structures 308 (2025) 107642), section 4.2, text of Fig. 5 (semi-recursive, "
                 "Fortran, Intel i7-8700 3.2 GHz, official buggy); not measured here, and our "
                 "buggy is a reconstruction (workbench/model/data/buggy-dlc.toml)")

# --------------------------------------------------------------------------------------
# the models
# --------------------------------------------------------------------------------------

#: open-chain data: link length (m), gravity (m/s^2)
CHAIN_L = 0.3
CHAIN_G = 9.81


@dataclass(frozen=True)
class ChainData:
    """Numbers of the open planar chain of ``n`` links (every peer builds it from these).

    Link ``i`` (``i = 0`` hangs from a ground pivot at the origin, the others from the tip
    of the previous link) has length ``L``, its centre of mass at ``xg = L/2`` on its axis,
    mass ``m[i]``, central inertia ``Izz`` (fixed: not a function of the mass), a joint
    spring ``-k[i] q_i`` and damper ``-c[i] qd_i`` (rest angle 0) on its relative angle
    ``q_i``; gravity ``-g`` along y; the chain starts at rest at ``q0``."""

    n: int
    L: float
    xg: float
    Izz: float
    g: float
    m: tuple
    k: tuple
    c: tuple
    q0: tuple

    @property
    def p(self) -> np.ndarray:
        """The design vector ``[m_0..m_{n-1}, k_0.., c_0..]`` (the parameter order)."""
        return np.array(self.m + self.k + self.c, dtype=float)

    @property
    def names(self) -> list:
        return ([f"m{i}" for i in range(self.n)] + [f"k{i}" for i in range(self.n)]
                + [f"c{i}" for i in range(self.n)])


def chain_data(n: int) -> ChainData:
    """The benchmark's open planar chain of ``n`` links (see :class:`ChainData`)."""
    if int(n) < 1:
        raise ValueError(f"an open chain needs at least one link, got {n!r}")
    n = int(n)
    L = CHAIN_L
    return ChainData(n=n, L=L, xg=0.5 * L, Izz=L * L / 12.0, g=CHAIN_G,
                     m=tuple(1.0 + 0.05 * i for i in range(n)),
                     k=tuple(10.0 + 1.0 * i for i in range(n)),
                     c=tuple(0.05 for _ in range(n)),
                     q0=tuple([0.3] + [0.1 * (-1) ** i for i in range(1, n)]))


def open_chain(n: int = 5) -> Model:
    """A planar open chain of ``n`` links (:func:`chain_data`) whose link masses ``m{i}``,
    joint stiffnesses ``k{i}`` and joint dampings ``c{i}`` are named parameters (``3 n``
    design parameters).  A benchmark model, not a physical reference."""
    d = chain_data(n)
    m = Model(f"open-chain-{d.n}", gravity=(0.0, -d.g, 0.0), planar=True)
    parent = GROUND
    for i in range(d.n):
        mi = m.parameter(f"m{i}", d.m[i], "kg", "benchmark value")
        ki = m.parameter(f"k{i}", d.k[i], "N*m/rad", "benchmark value")
        ci = m.parameter(f"c{i}", d.c[i], "N*m*s/rad", "benchmark value")
        b = f"link{i}"
        m.body(b, mi, com=(d.xg, 0.0, 0.0), inertia=(0.0, 0.0, d.Izz),
               points={"tip": (d.L, 0.0, 0.0)})
        m.revolute(f"j{i}", parent, b, parent_point=(0.0, 0.0, 0.0) if i == 0 else "tip",
                   axis=(0, 0, 1), q0=d.q0[i])
        m.joint_spring(f"s{i}", f"j{i}", k=ki, c=ci, q0=0.0)
        parent = b
    return m


def chain_objective(n: int) -> objectives.Objective:
    """``J = int sum_i q_i^2 dt`` over the joint angles of :func:`open_chain`."""
    return objectives.Objective("sum_q2", tuple(objectives.Term("coordinate", f"j{i}")
                                                for i in range(int(n))))


def _closed_chain_data(model: Model) -> dict:
    """The numbers of the closed chain :func:`workbench.apps.bench.closed_chain` read from
    its :class:`~workbench.Model` (parameter values, joint and spring angles, points, the
    rod), so that the MuJoCo peer builds the identical chain."""
    P = model.parameters

    def val(x):
        return P[x].value if isinstance(x, str) else float(x)

    links = [b for b in model.bodies if b != GROUND]
    rod = model.distances["rod"]
    out = {"n": len(links), "L": float(model.bodies[links[0]].points["tip"][0]),
           "angles": [float(model.joints[f"j{i}"].q0[0]) for i in range(len(links))],
           "m": [], "xg": [], "Izz": [], "k": [], "c": [], "rest": [],
           "anchor": tuple(float(x) for x in model.bodies[GROUND].points[rod.point2][:2]),
           "rod": float(rod.length), "g": -float(model.gravity[1])}
    for i, b in enumerate(links):
        body = model.bodies[b]
        sp = model.joint_springs[f"s{i}"]
        out["m"].append(val(body.mass))
        out["xg"].append(val(body.com[0]))
        out["Izz"].append(val(body.inertia[2]))
        out["k"].append(val(sp.k))
        out["c"].append(val(sp.c))
        out["rest"].append(float(sp.q0))
    return out


# --------------------------------------------------------------------------------------
# rows and timing
# --------------------------------------------------------------------------------------


@dataclass
class PeerRow:
    """One line of the table: a workbench figure beside a peer's on the same model."""

    case: str                 # model and size
    quantity: str             # what is timed (e.g. "forward")
    unit: str                 # unit of the two values ("us/step", "x forward", "x real time")
    workbench: float          # the workbench figure (median of the alternated runs)
    peer: str                 # the peer and its configuration
    peer_value: float         # the peer's figure (nan: not installed / failed)
    status: str               # "measured", "published", NOT_INSTALLED or "failed: ..."
    comparison: str           # how the peer's trajectory compares with ours (or differs)
    difference: float = float("nan")   # the compared quantity's max difference (nan: n/a)
    workbench_runs: list = field(default_factory=list)
    peer_runs: list = field(default_factory=list)
    workbench_cpu: float = float("nan")   # the same figure from process CPU time (median)
    peer_cpu: float = float("nan")
    workbench_cpu_per_wall: float = float("nan")   # process CPU / wall time (<= ~1: one core)
    peer_cpu_per_wall: float = float("nan")

    @property
    def ratio(self) -> float:
        """peer / workbench (> 1: the workbench is faster for times, slower for RTF)."""
        if not (np.isfinite(self.peer_value) and self.workbench):
            return float("nan")
        return self.peer_value / self.workbench

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio_peer_to_workbench": self.ratio}


class _Runs:
    """Wall and process CPU seconds of alternated runs (:func:`_alternate`)."""

    def __init__(self, names):
        self.wall = {k: [] for k in names}
        self.cpu = {k: [] for k in names}

    def us(self, k, N) -> list:
        """Wall microseconds per step of every run of ``k`` (empty: not run)."""
        return [1e6 * s / N for s in self.wall.get(k, [])]

    def cpu_us(self, k, N) -> float:
        """Median process CPU microseconds per step of ``k`` (nan: not run)."""
        return _med([1e6 * s / N for s in self.cpu.get(k, [])])

    def cpu_per_wall(self, k) -> float:
        """Median CPU / wall ratio of ``k``: about 1 (or less on a loaded machine) for one
        busy core, above 1 for several."""
        return _med([c / w for c, w in zip(self.cpu.get(k, []), self.wall.get(k, []))])


#: seconds of pause before each timed run of :func:`_alternate`
SETTLE_S = 0.2


def _alternate(fns: dict, repeat: int) -> _Runs:
    """Run the callables of ``fns`` in turn ``repeat`` times (alternated, so that a load
    change on the shared machine hits all of them), timing the wall and the process CPU
    time of each run."""
    runs = _Runs(fns)
    for _ in range(max(1, int(repeat))):
        for k, fn in fns.items():
            # a pause before each timed run: worker threads a peer leaves spinning after
            # its call (XLA's) go idle instead of sharing the pinned core with the next run
            time.sleep(SETTLE_S)
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            runs.wall[k].append(time.perf_counter() - t0)
            runs.cpu[k].append(time.process_time() - c0)
    return runs


def _med(runs) -> float:
    return float(np.median(runs)) if runs else float("nan")


def _failed(exc) -> str:
    msg = " ".join(str(exc).split())[:200]
    return f"failed ({type(exc).__name__}: {msg})"


# --------------------------------------------------------------------------------------
# peers: imports
# --------------------------------------------------------------------------------------


def _import_jax():
    """(jax, jax.numpy, note) or (None, None, reason): XLA one-core flags set first."""
    note = f"XLA_FLAGS={XLA_ONE_CORE!r} set before importing jax"
    if "jax" in sys.modules:
        note = "jax was imported before this run: its XLA_FLAGS are whatever they were"
    else:
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " + XLA_ONE_CORE).strip()
    try:
        import jax
        import jax.numpy as jnp
    except Exception:                                      # noqa: BLE001 - optional peer
        return None, None, NOT_INSTALLED
    jax.config.update("jax_enable_x64", True)
    return jax, jnp, note


def _import(name):
    try:
        return __import__(name)
    except Exception:                                      # noqa: BLE001 - optional peer
        return None


# --------------------------------------------------------------------------------------
# JAX: the same chain, the same trapezoidal rule
# --------------------------------------------------------------------------------------


def _jax_chain(jax, jnp, d: ChainData, h: float, nsteps: int):
    """(forward, gradient) jitted functions of the design vector ``p``: forward returns
    ``(J, q rows (nsteps + 1, n))``, gradient ``dJ/dp``."""
    n = d.n
    lever = np.zeros((n, n))               # lever[i, a]: arm of link a in link i's COM
    for i in range(n):
        for a in range(i):
            lever[i, a] = d.L
        lever[i, i] = d.xg
    lever = jnp.asarray(lever)
    T = jnp.asarray(np.tril(np.ones((n, n))))     # absolute angles theta = T q
    Iz = jnp.full(n, d.Izz)
    q_init = jnp.asarray(d.q0)

    def accel(q, v, p):
        m, k, c = p[:n], p[n:2 * n], p[2 * n:]
        th, w = T @ q, T @ v
        C = (lever.T * m) @ lever + jnp.diag(Iz)       # sum_i m_i l_ia l_ib + Izz delta_ab
        dth = th[:, None] - th[None, :]
        M = T.T @ (C * jnp.cos(dth)) @ T
        hv = (C * jnp.sin(dth)) @ (w * w)             # velocity terms (absolute angles)
        G = d.g * jnp.cos(th) * (m @ lever)           # gravity (absolute angles)
        Q = -k * q - c * v - T.T @ (hv + G)
        return jnp.linalg.solve(M, Q)

    def step(state, p):
        q, v, a = state

        def res(an):
            return an - accel(q + h * v + 0.25 * h * h * (a + an), v + 0.5 * h * (a + an), p)

        def newton(_, an):
            return an - jnp.linalg.solve(jax.jacfwd(res)(an), res(an))

        an = jax.lax.fori_loop(0, JAX_NEWTON, newton, a)
        return q + h * v + 0.25 * h * h * (a + an), v + 0.5 * h * (a + an), an

    def run(p):
        v0 = jnp.zeros(n)
        a0 = accel(q_init, v0, p)

        def body(carry, _):
            st, J = carry
            st2 = step(st, p)
            J = J + 0.5 * h * (jnp.sum(st[0] ** 2) + jnp.sum(st2[0] ** 2))
            return (st2, J), st2[0]

        (_, J), qs = jax.lax.scan(body, ((q_init, v0, a0), 0.0), None, length=nsteps)
        return J, jnp.concatenate([q_init[None, :], qs])

    return jax.jit(run), jax.jit(jax.grad(lambda p: run(p)[0]))


# --------------------------------------------------------------------------------------
# Pinocchio: the same chain
# --------------------------------------------------------------------------------------


def _pin_chain(pin, d: ChainData):
    model = pin.Model()
    parent = 0
    for i in range(d.n):
        placement = pin.SE3(np.eye(3), np.array([d.L if i > 0 else 0.0, 0.0, 0.0]))
        jid = model.addJoint(parent, pin.JointModelRZ(), placement, f"j{i}")
        # planar motion about z: only Izz enters (Ixx = Iyy = Izz keeps it a valid inertia)
        model.appendBodyToJoint(jid, pin.Inertia(d.m[i], np.array([d.xg, 0.0, 0.0]),
                                                 np.diag([d.Izz] * 3)), pin.SE3.Identity())
        parent = jid
    model.gravity.linear[:] = [0.0, -d.g, 0.0]
    return model


# --------------------------------------------------------------------------------------
# MuJoCo: the same closed chain
# --------------------------------------------------------------------------------------


def _mujoco_xml(c: dict, h: float, integrator: str, rod_offset: float) -> str:
    """MJCF of the closed chain: hinges about z (radians), the links' inertials, joint
    springs at their rest angles, and the rod as a spatial tendon tip -> anchor held at its
    length by a tendon equality (``rod_offset``: its length minus the length at qpos0)."""
    body, close = "", ""
    for i in range(c["n"]):
        pos = "0 0 0" if i == 0 else f"{c['L']!r} 0 0"
        I = c["Izz"][i]
        body += (f'<body name="link{i}" pos="{pos}"><joint name="j{i}" type="hinge" '
                 f'axis="0 0 1" stiffness="{c["k"][i]!r}" springref="{c["rest"][i]!r}" '
                 f'damping="{c["c"][i]!r}"/><inertial pos="{c["xg"][i]!r} 0 0" '
                 f'mass="{c["m"][i]!r}" diaginertia="{I!r} {I!r} {I!r}"/>')
        if i == c["n"] - 1:
            body += f'<site name="tip" pos="{c["L"]!r} 0 0"/>'
        close += "</body>"
    ax, ay = c["anchor"]
    return (f'<mujoco><compiler angle="radian"/><option timestep="{h!r}" '
            f'integrator="{integrator}" gravity="0 {-c["g"]!r} 0"/><worldbody>'
            f'<site name="anchor" pos="{ax!r} {ay!r} 0"/>{body}{close}</worldbody>'
            f'<tendon><spatial name="rod"><site site="tip"/><site site="anchor"/></spatial>'
            f'</tendon><equality><tendon tendon1="rod" polycoef="{float(rod_offset)!r} 0 0 0 0"/>'
            f'</equality></mujoco>')


def _mujoco_closed_chain(mujoco, c: dict, h: float, integrator: str):
    """(model, data) of the closed chain at its initial state (checked: rod at length)."""
    m0 = mujoco.MjModel.from_xml_string(_mujoco_xml(c, h, integrator, 0.0))
    model = mujoco.MjModel.from_xml_string(
        _mujoco_xml(c, h, integrator, c["rod"] - float(m0.tendon_length0[0])))
    data = mujoco.MjData(model)
    data.qpos[:] = c["angles"]
    mujoco.mj_forward(model, data)
    if abs(data.ten_length[0] - c["rod"]) > 1e-12:
        raise RuntimeError(f"MuJoCo closed chain not closed at t0: rod {data.ten_length[0]}")
    return model, data


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------


def _chain_rows(n, T, h, repeat, jax_mod, echo) -> tuple[list, dict]:
    """Rows of the open chain ``n``: forward, gradient, ratio (workbench vs JAX)."""
    jax, jnp, jax_note = jax_mod
    d = chain_data(n)
    N = int(round(T / h))
    cm = open_chain(n).compile()
    obj = [chain_objective(n)]
    kw = dict(objectives=obj, parameters=d.names, t_end=N * h, dt=h, threads=1)
    fwd = lambda: simulate(cm, N * h, h)                                   # noqa: E731
    grad = lambda: sensitivity(cm, method="adjoint", products="forward", **kw)  # noqa: E731
    # the same adjoint without step Jacobians (reverse-mode step products, issue 29 item 1)
    grad_rev = lambda: sensitivity(cm, method="adjoint", products="reverse", **kw)  # noqa: E731
    sim, res, res_rev = fwd(), grad(), grad_rev()                          # warm-up
    fwd(), grad(), grad_rev()
    diff_rev = float(np.max(np.abs(res_rev.gradient - res.gradient))
                     / np.max(np.abs(res.gradient)))
    case = f"open chain n = {n}, p = {3 * n}, {N} steps"
    ver = f" {jax.__version__}" if jax is not None else ""
    peer = f"JAX{ver} jit (same ODE, trapezoidal, {JAX_NEWTON} Newton its)"
    extra = {"psi": float(res.psi[0])}
    status, comp_f, comp_g, diff_f, diff_g = "measured", "", "", float("nan"), float("nan")
    fns = {"wb_fwd": fwd, "wb_grad": grad, "wb_grad_rev": grad_rev}
    if jax is None:
        status = jax_note
        comp_f = comp_g = "-"
    else:
        try:
            jf, jg = _jax_chain(jax, jnp, d, h, N)
            p0 = jnp.asarray(d.p)
            t0 = time.perf_counter()
            J, qs = jax.block_until_ready(jf(p0))
            extra["jax_compile_forward_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            g = np.asarray(jax.block_until_ready(jg(p0)))
            extra["jax_compile_grad_s"] = time.perf_counter() - t0
            diff_f = float(np.max(np.abs(np.asarray(qs) - sim.z)))
            diff_g = float(np.max(np.abs(g - res.gradient[0])) / np.max(np.abs(res.gradient)))
            extra["jax_psi"] = float(J)
            comp_f = (f"max |q_JAX - q_ours| = {diff_f:.1e} rad over all {N + 1} rows "
                      f"(J: {float(J):.12g} vs {res.psi[0]:.12g})")
            comp_g = f"max |dJ/dp_JAX - ours| / max |dJ/dp| = {diff_g:.1e}"
            fns["jax_fwd"] = lambda: jax.block_until_ready(jf(p0))
            fns["jax_grad"] = lambda: jax.block_until_ready(jg(p0))
        except Exception as exc:                          # noqa: BLE001 - report, go on
            status = _failed(exc)
            comp_f = comp_g = "-"
    R = _alternate(fns, repeat)
    wf, wg = _med(R.us("wb_fwd", N)), _med(R.us("wb_grad", N))
    wgr = _med(R.us("wb_grad_rev", N))
    jf_, jg_ = _med(R.us("jax_fwd", N)), _med(R.us("jax_grad", N))
    jax_cfg = f"{peer}; {jax_note}" if jax is not None else peer

    def timed(wb, pk):
        return dict(workbench_runs=R.us(wb, N), peer_runs=R.us(pk, N),
                    workbench_cpu=R.cpu_us(wb, N), peer_cpu=R.cpu_us(pk, N),
                    workbench_cpu_per_wall=R.cpu_per_wall(wb),
                    peer_cpu_per_wall=R.cpu_per_wall(pk))

    rows = [
        PeerRow(case, "forward", "us/step", wf, jax_cfg, jf_, status, comp_f, diff_f,
                **timed("wb_fwd", "jax_fwd")),
        PeerRow(case, "reverse gradient (workbench adjoint incl. its forward run vs "
                "jax.grad)", "us/step", wg, "JAX jax.grad of the jitted forward", jg_, status,
                comp_g, diff_g, **timed("wb_grad", "jax_grad")),
        PeerRow(case, "ratio reverse gradient / forward", "x forward", wg / wf,
                "JAX grad / JAX forward", jg_ / jf_, status,
                "ratio of the medians of the two rows above",
                workbench_runs=[g / f for g, f in zip(R.us("wb_grad", N), R.us("wb_fwd", N))],
                peer_runs=[g / f for g, f in zip(R.us("jax_grad", N), R.us("jax_fwd", N))],
                workbench_cpu=R.cpu_us("wb_grad", N) / R.cpu_us("wb_fwd", N),
                peer_cpu=R.cpu_us("jax_grad", N) / R.cpu_us("jax_fwd", N)),
        PeerRow(case, "ratio reverse gradient / forward, workbench adjoint with "
                "products='reverse' (no step Jacobians)", "x forward", wgr / wf,
                "JAX grad / JAX forward", jg_ / jf_, status,
                f"its gradient = the step-Jacobian adjoint's to {diff_rev:.1e} "
                "(max difference / max |gradient|)", diff_rev,
                workbench_runs=[g / f for g, f in zip(R.us("wb_grad_rev", N),
                                                      R.us("wb_fwd", N))],
                peer_runs=[g / f for g, f in zip(R.us("jax_grad", N), R.us("jax_fwd", N))],
                workbench_cpu=R.cpu_us("wb_grad_rev", N) / R.cpu_us("wb_fwd", N),
                peer_cpu=R.cpu_us("jax_grad", N) / R.cpu_us("jax_fwd", N)),
    ]
    for r in rows:
        echo(_line(r))
    return rows, extra


def _pin_rows(n, T, h, repeat, pin, echo) -> list:
    """Adjoint sweep per step (workbench) vs computeABADerivatives per call (Pinocchio)."""
    d = chain_data(n)
    N = int(round(T / h))
    cm = open_chain(n).compile()
    kw = dict(objectives=[chain_objective(n)], parameters=d.names, t_end=N * h, dt=h,
              threads=1)
    sim = simulate(cm, N * h, h, keep_states=True)
    sweep = lambda: sensitivity(cm, method="adjoint", simulation=sim,  # noqa: E731
                                products="forward", **kw)
    sweep()
    case = f"open chain n = {n}, p = {3 * n}, {N} steps"
    fns = {"wb": sweep}
    status, comp, diff = "measured", "-", float("nan")
    peer = (f"Pinocchio {getattr(pin, '__version__', '?')} computeABADerivatives, one call "
            "per row of our trajectory (Python loop)")
    if pin is None:
        status, peer = NOT_INSTALLED, "Pinocchio computeABADerivatives"
    else:
        try:
            pm = _pin_chain(pin, d)
            pd_ = pm.createData()
            k, c = np.array(d.k), np.array(d.c)
            Q = np.ascontiguousarray(sim.z)
            V = np.ascontiguousarray(sim.zd)
            TAU = -k * Q - c * V
            acc = np.array([pin.aba(pm, pd_, Q[r], V[r], TAU[r]) for r in range(len(Q))])
            diff = float(np.max(np.abs(acc - sim.zdd)))
            comp = (f"max |aba(q, v, tau) - qdd_ours| = {diff:.1e} rad/s^2 on all {len(Q)} "
                    f"rows (max |qdd| = {np.max(np.abs(sim.zdd)):.3g}); derivatives wrt q, v, "
                    "tau only (no parameter gradient)")

            def loop():
                for r in range(N):
                    pin.computeABADerivatives(pm, pd_, Q[r], V[r], TAU[r])

            def aba_loop():
                for r in range(N):
                    pin.aba(pm, pd_, Q[r], V[r], TAU[r])
            loop()
            aba_loop()
            fns["pin"] = loop
        except Exception as exc:                          # noqa: BLE001
            status = _failed(exc)
    R = _alternate(fns, repeat)
    row = PeerRow(case, "adjoint sweep per step (given the kept forward states; 3n "
                  "parameters) vs one ABA-derivative call", "us/step", _med(R.us("wb", N)),
                  peer, _med(R.us("pin", N)), status, comp, diff, R.us("wb", N),
                  R.us("pin", N), R.cpu_us("wb", N), R.cpu_us("pin", N),
                  R.cpu_per_wall("wb"), R.cpu_per_wall("pin"))
    echo(_line(row))
    # item 2: our forward step against what a trapezoidal step built on Pinocchio's ABA
    # costs: as many aba calls as our Newton evaluations per step and one
    # computeABADerivatives for the step's Newton matrix (our modified Newton)
    ev = float(np.mean(sim.newton_iterations[1:]))
    fns2 = {"wb": lambda: simulate(cm, N * h, h)}
    if "pin" in fns:
        fns2["aba"] = aba_loop
        fns2["der"] = loop
    R2 = _alternate(fns2, repeat)
    est = [ev * a + b for a, b in zip(R2.us("aba", N), R2.us("der", N))]
    peer2 = (f"Pinocchio ABA trapezoidal step, ESTIMATE: {ev:.2f} aba calls (our Newton "
             "evaluations per step) + 1 computeABADerivatives (the step's Newton matrix), "
             "each timed per call from a Python loop over our rows (binding overhead "
             "included, the d x d solve not counted)")
    row2 = PeerRow(case, "forward per step vs a Pinocchio-ABA trapezoidal step (estimate)",
                   "us/step", _med(R2.us("wb", N)),
                   peer2 if "pin" in fns else "Pinocchio ABA trapezoidal step (estimate)",
                   _med(est), status, "the same states as the row above", float("nan"),
                   R2.us("wb", N), est, R2.cpu_us("wb", N),
                   (ev * R2.cpu_us("aba", N) + R2.cpu_us("der", N)) if "pin" in fns
                   else float("nan"), R2.cpu_per_wall("wb"),
                   R2.cpu_per_wall("der") if "pin" in fns else float("nan"))
    echo(_line(row2))
    return [row, row2]


def _closed_rows(T, h, repeat, mujoco, echo) -> list:
    """10-link closed chain forward per step: workbench vs MuJoCo implicit/implicitfast."""
    n = 10
    N = int(round(T / h))
    cmodel = closed_chain(n)
    cm = cmodel.compile()
    fwd = lambda: simulate(cm, N * h, h)                                  # noqa: E731
    sim = fwd()
    case = f"closed chain {n} links (9 dof, exact closure), {N} steps"
    fns = {"wb": fwd}
    peers = {}
    cdata = _closed_chain_data(cmodel)
    if mujoco is not None:
        from mujoco import rollout
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        for integ in ("implicit", "implicitfast"):
            try:
                model, data = _mujoco_closed_chain(mujoco, cdata, h, integ)
                s0 = np.empty(mujoco.mj_stateSize(model, spec))
                mujoco.mj_getState(model, data, s0, spec)
                s0 = s0[None, :]
                st, _ = rollout.rollout(model, data, s0, nstep=N)
                scratch = mujoco.MjData(model)
                mujoco.mj_setState(model, scratch, st[0, -1], spec)
                if not (np.all(np.isfinite(st)) and abs(scratch.time - N * h) < 0.5 * h):
                    # MuJoCo resets the state of an unstable run (warning, time back to 0)
                    raise RuntimeError(f"MuJoCo's run did not reach t = {N * h:g} s "
                                       f"(unstable: it ended at t = {scratch.time:g} s)")
                drift, dq = 0.0, 0.0
                for r in range(N):
                    mujoco.mj_setState(model, scratch, st[0, r], spec)
                    mujoco.mj_fwdPosition(model, scratch)
                    drift = max(drift, abs(scratch.ten_length[0] - cdata["rod"]))
                    dq = max(dq, float(np.max(np.abs(scratch.qpos - sim.z[r + 1]))))
                comp = (f"soft closure (default solref/solimp): loop drift max |l_rod - "
                        f"{cdata['rod']}| = {drift:.1e} m (ours: max |Phi| = "
                        f"{sim.max_constraint_violation:.0e}); max |q_MuJoCo - q_ours| = "
                        f"{dq:.1e} rad")
                peers[integ] = ("measured", comp, drift)
                fns[integ] = (lambda m_=model, d_=data, s_=s0:
                              rollout.rollout(m_, d_, s_, nstep=N))
            except Exception as exc:                      # noqa: BLE001
                peers[integ] = (_failed(exc), "-", float("nan"))
    R = _alternate(fns, repeat)
    rows = []
    ver = getattr(mujoco, "__version__", "")
    for integ in ("implicit", "implicitfast"):
        status, comp, drift = peers.get(integ, (NOT_INSTALLED, "-", float("nan")))
        rows.append(PeerRow(case, "forward", "us/step", _med(R.us("wb", N)),
                            f"MuJoCo {ver} {integ}, h = {h:g}, rod = tendon equality, "
                            "mujoco.rollout (C loop, one thread)", _med(R.us(integ, N)),
                            status, comp, drift, R.us("wb", N), R.us(integ, N),
                            R.cpu_us("wb", N), R.cpu_us(integ, N), R.cpu_per_wall("wb"),
                            R.cpu_per_wall(integ)))
    for r in rows:
        echo(_line(r))
    return rows


def _buggy_rows(T, repeat, echo) -> list:
    """Buggy DLC: real-time factor of dynamics + adjoint gradient, one core."""
    from workbench.apps.vehicle import prepare
    model = prepare("buggy-dlc")
    cm = model.compile()
    dt = float(model.meta["dt"])
    T = float(model.meta["t_end"]) if T is None else max(1, int(round(T / dt))) * dt
    kw = dict(method="adjoint", t_end=T, dt=dt, threads=1)
    sensitivity(cm, **{**kw, "t_end": 3 * dt})
    sensitivity(cm, **kw)
    rtf, cpu, cpu_wall = [], [], []
    for _ in range(max(1, int(repeat))):
        c0, t0 = time.process_time(), time.perf_counter()
        r = sensitivity(cm, **kw)
        c, w = time.process_time() - c0, time.perf_counter() - t0
        cpu.append(T / c)
        cpu_wall.append(c / w)
        rtf.append(T / (r.timings["simulation_s"] + r.timings["sensitivity_s"]))
    row = PeerRow(f"buggy double lane change {T:g} s, h = {dt * 1e3:g} ms (our "
                  "reconstruction)", "dynamics + adjoint gradient, one core",
                  "x real time", _med(rtf), "MBSLIM (Fortran), seed 001", MBSLIM_DLC_RTF,
                  "published", MBSLIM_SOURCE, float("nan"), rtf, [], _med(cpu),
                  float("nan"), _med(cpu_wall))
    echo(_line(row))
    return [row]


# --------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------


def _fmt(x) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    return f"{x:.3g}"


def _line(r: PeerRow) -> str:
    peer = _fmt(r.peer_value) if r.status in ("measured", "published") else r.status
    return (f"{r.case} | {r.quantity}: workbench {_fmt(r.workbench)} {r.unit}; "
            f"{r.peer.split(';')[0]}: {peer}")


def _machine() -> dict:
    cpu = cpu_name()
    vers = {"workbench": _wb_version, "python": platform.python_version(),
            "numpy": np.__version__}
    for name, mod in (("numba", "numba"), ("jax", "jax"), ("pin", "pinocchio"),
                      ("mujoco", "mujoco")):
        m = sys.modules.get(mod)
        if m is not None:
            vers[name] = getattr(m, "__version__", "?")
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "platform": platform.platform(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "versions": vers}


def _finite(x):
    """``x`` with every non-finite float as None (strict JSON)."""
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _max_finite(values) -> float:
    v = [x for x in values if np.isfinite(x)]
    return max(v) if v else float("nan")


def markdown(rows: list, meta: dict) -> str:
    """The table of ``rows`` as Markdown (with the run's conditions)."""
    out = [f"# workbench bench peers{' --quick' if meta.get('quick') else ''}", "",
           f"Measured {meta['date']} on {meta['machine']['cpu']} "
           f"({meta['machine']['logical_cpus']} logical CPUs, load average at the end "
           f"{', '.join(f'{x:.2f}' for x in meta['machine']['load_average'] or [])}); "
           f"versions: {', '.join(f'{k} {v}' for k, v in meta['machine']['versions'].items())}.",
           "", f"One core: {meta['one_core']}.  Process CPU time / wall time of the timed "
           f"runs (median per figure; above 1 would mean more than one busy core): at most "
           f"{_max_finite(r.workbench_cpu_per_wall for r in rows):.2f} (workbench), "
           f"{_max_finite(r.peer_cpu_per_wall for r in rows):.2f} (peers).", "",
           f"Each figure is the median of {meta['repeat']} runs, workbench and peer "
           "alternated, after a warm-up (compilation excluded), from the wall time; in "
           "parentheses the same figure from the process CPU time (less sensitive to other "
           "processes on a loaded machine).  peer/wb (from the wall times) > 1: the peer "
           "takes longer (for `x real time`: the peer is faster).", "",
           "| case | quantity | workbench | peer | peer value | peer/wb | trajectory vs ours |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        pv = f"{_fmt(r.peer_value)} {r.unit}" if r.status in ("measured", "published") \
            else r.status
        if r.status == "published":
            pv += " (published)"
        elif np.isfinite(r.peer_cpu):
            pv += f" (CPU {_fmt(r.peer_cpu)})"
        wv = f"{_fmt(r.workbench)} {r.unit}"
        if np.isfinite(r.workbench_cpu):
            wv += f" (CPU {_fmt(r.workbench_cpu)})"
        cells = (r.case, r.quantity, wv, r.peer, pv, _fmt(r.ratio), r.comparison)
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    out.append("")
    return "\n".join(out)


def bench_peers(quick: bool = False, out=None, echo=print, repeat: int = 5) -> list:
    """Run the peer benchmark (module docstring); returns the :class:`PeerRow` s and,
    with ``out``, writes ``out/peers.json`` and ``out/peers.md``.

    ``quick``: short horizons (0.2 s of the chains, 1.5 s of the buggy), the chain
    ``n = 5`` only and at most 2 repetitions: a smoke run, not the table."""
    import numba
    if not (isinstance(repeat, (int, np.integer)) and repeat >= 1):
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    path = None
    if out is not None:                       # before measuring: a bad path fails at once
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
    h = 1e-3
    if quick:
        T, sizes, pin_sizes, T_buggy, repeat = 0.2, (5,), (5,), 1.5, min(int(repeat), 2)
    else:
        T, sizes, pin_sizes, T_buggy = 1.0, (5, 20), (5, 20), None
    jax_mod = _import_jax()
    pin = _import("pinocchio")
    mujoco = _import("mujoco")
    threads0 = numba.get_num_threads()
    numba.set_num_threads(1)
    # one core for the whole process (threads XLA starts despite its flags included):
    # pinned to the first CPU it may use, restored after
    cpus0 = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else None
    pinned = ""
    if cpus0:
        os.sched_setaffinity(0, {min(cpus0)})
        pinned = f"the process pinned to CPU {min(cpus0)} (sched_setaffinity); "
    rows, extra = [], {}
    try:
        for n in sizes:
            r, e = _chain_rows(n, T, h, repeat, jax_mod, echo)
            rows += r
            extra[f"open_chain_{n}"] = e
        rows += _closed_rows(T, h, repeat, mujoco, echo)
        for n in pin_sizes:
            rows += _pin_rows(n, T, h, repeat, pin, echo)
        rows += _buggy_rows(T_buggy, repeat, echo)
    finally:
        numba.set_num_threads(threads0)
        if cpus0:
            os.sched_setaffinity(0, cpus0)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "quick": bool(quick),
            "repeat": int(repeat), "dt": h, "machine": _machine(),
            "one_core": (pinned + "numba.set_num_threads(1) for the run and threads=1 for the "
                         "sensitivities; JAX: " + jax_mod[2] + "; MuJoCo: rollout with one "
                         "MjData (one thread); Pinocchio: single-threaded calls"),
            "extra": extra}
    if path is not None:
        (path / "peers.json").write_text(json.dumps(
            _finite({**meta, "rows": [r.to_dict() for r in rows]}), indent=2))
        (path / "peers.md").write_text(markdown(rows, meta))
        echo(f"wrote {path / 'peers.json'} and {path / 'peers.md'}")
    return rows
