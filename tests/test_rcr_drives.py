"""Drives (rheonomic coordinate constraints ``z_c - f(t) = 0``) in RCR (seed 004, issue 27):
a driven coordinate is prescribed, ``z_c = f(t)``, ``zd_c = f'(t)``, ``zdd_c = f''(t)``
(hybrid dynamics, Featherstone ch. 9: no pivot, its known acceleration in the bias terms
and, in a loop, in the bracket next to ``kappa``), and ``formulation="rcr"`` integrates the
model's DOF with every other non-driven coordinate a loop dependent.

References:

* the **null-space solve** of :mod:`test_rcr_loops` (``null_space_reference``): its
  ``Phi_z`` and ``kappa`` come from the kernels' rows, which include the drive rows
  (``Phi_z`` row ``e_c^T``, ``kappa_c = -f''(t)``), so the reference imposes the driven
  accelerations; it shares the kinematics with RCR but neither the elimination nor the
  recursion.  Tolerances as there (1e-10 relative with ``cond(N^T M N) < 1e5`` asserted);
* **Matrix-R** (``formulation="sr-origin"``), where the drive rows are rows of
  ``Theta = [Phi; B]``: the same trapezoidal rule and the same RK4 on the same DOF.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_rcr_loops import (CLOSURE_TOL, TOL, _kinematics, closure_terms, null_basis,
                            null_space_reference, random_loop)

import workbench as wb
from workbench.errors import OptionError
from workbench.formulations.rcr import LoopSolver
from workbench.formulations.rcr.topology import describe
from workbench.kernels import tree as K

#: time of the single-state checks
T0 = 0.3


def driven_loop(seed, drives, **kw):
    """``random_loop(seed, **kw)`` with the joints ``drives`` driven by random cubics
    ``f(t)`` that pass through the loop's consistent configuration at ``T0`` (so that
    ``(T0, z)`` closes the drives too) with nonzero ``f'``, ``f''``."""
    model, z = random_loop(seed, **kw)
    cm0 = model.compile()
    rng = np.random.default_rng(100 + seed)
    for jn in drives:
        c = cm0.coordinate(jn)
        c1, c2, c3 = rng.uniform(-1.0, 1.0, 3)
        c0 = z[c] - c1 * T0 - c2 * T0 ** 2 - c3 * T0 ** 3
        model.drive(f"drive_{jn}", jn, {"type": "polynomial",
                                          "coefficients": [c0, c1, c2, c3]})
    return model, z


def drive_values(cm, c, t):
    """``(f, f', f'')`` of the drive of coordinate ``c`` (the kernels' time function)."""
    ma = cm.arrays
    (k,) = [k for k in range(ma.c_type.shape[0])
            if ma.c_type[k] == 4 and ma.c_i[k, 0] == c]
    return K.time_function(ma, ma.p, ma.c_i[k, 1], t)


def driven_state(cm, z, t, seed):
    """Velocities that satisfy every row at velocity level (drives: ``zd_c = f'(t)``): the
    least-squares particular solution of ``Phi_z zd = -Phi_t`` plus a random null-space
    part."""
    ma = cm.arrays
    ws = _kinematics(cm, z, np.zeros(cm.n))
    m = ma.c_type.shape[0]
    phit = np.zeros(m)
    K.constraints(ma, ma.p, t, z, np.zeros(cm.n), np.zeros(cm.n), ws.A, ws.r, ws.Z, ws.Zd,
                  1, phit)
    Jc, _ = closure_terms(cm, t, z, np.zeros(cm.n))
    N, _ = null_basis(Jc)
    rng = np.random.default_rng(seed)
    return (np.linalg.lstsq(Jc, -phit, rcond=None)[0]
            + N @ rng.uniform(-1.0, 1.0, N.shape[1]))


def rows(cm, t, z, zd):
    """``Phi`` and ``Phi_z zd + Phi_t`` of every row (cut joints and drives)."""
    ma = cm.arrays
    ws = _kinematics(cm, z, zd)
    m = ma.c_type.shape[0]
    out = np.zeros((2, m))
    for level in (0, 1):
        K.constraints(ma, ma.p, t, z, zd, np.zeros(cm.n), ws.A, ws.r, ws.Z, ws.Zd, level,
                      out[level])
    return out


CASES = {
    # a serial chain of 8 joints closed to the ground (m = 5): a driven joint in the chain
    # (ja1: chain ja0 ja1 ja2, no pivot at ja1), among the dependents (ja5: the trailing
    # free set skips it, ja2 becomes a dependent) and both at once
    "chain": (1, ["ja1"], dict(cut="revolute", nA=8), None),
    "among-dependents": (2, ["ja5"], dict(cut="revolute", nA=8), None),
    "chain-and-dependents": (3, ["ja1", "ja6"], dict(cut="revolute", nA=8), None),
    # ACS with outboard independents ja2, ja7 and a driven outboard coordinate ja4
    "outboard": (11, ["ja4"], dict(cut="revolute", nA=9), [1, 3, 5, 6, 8]),
    # a moving base, side branches: the base joint, a tree joint off a loop body and one
    # off the base are driven (tree frames: unreduced inertia), and a joint on branch B
    "tree-and-branch": (4, ["jbase", "js0", "js1", "jb1"],
                        dict(cut="spherical", nA=4, nB=3, moving_base=True, side=True), None),
    # a weld cut (m = 6) on a two-branch loop, one driven joint on each branch
    "weld": (6, ["ja2", "jb1"], dict(cut="fixed", nA=5, nB=4), None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_driven_loop_accelerations_match_the_null_space_solve(case):
    seed, drives, kw, deps = CASES[case]
    model, z = driven_loop(seed, drives, **kw)
    cm = model.compile()
    names = cm.coord_names
    zd = driven_state(cm, z, T0, seed)
    ref, cond = null_space_reference(cm, T0, z, zd)
    assert cond < 1e5, f"cond(N^T M N) = {cond:.1e}: tolerance not justified"
    solver = LoopSolver(cm, None if deps is None else [names[i] for i in deps], z0=z)
    driven = sorted(cm.coordinate(j) for j in drives)
    assert solver.prescribed.tolist() == driven
    assert not set(driven) & set(solver.dependent.tolist())
    assert not set(driven) & set(solver.independent.tolist())
    zdd = solver.accelerations(T0, z, zd)
    err = np.abs(zdd - ref).max() / np.abs(ref).max()
    assert err < TOL, f"{case}: relative difference {err:.2e} (cond {cond:.1e})"
    for c in driven:
        assert zdd[c] == drive_values(cm, c, T0)[2]
    Jc, kappa = closure_terms(cm, T0, z, zd)
    res = np.abs(Jc @ zdd + kappa).max()
    assert res < CLOSURE_TOL * (np.abs(Jc).max() * np.abs(zdd).max() + np.abs(kappa).max())
    (g,) = describe(cm, solver.structure)
    if case == "chain":
        assert "ja1" in g["chain"]
    if case == "outboard":
        assert sorted(g["outboard"]) == ["ja2", "ja7"]
    # the whole evaluation: dependents off the closure, every rate unknown, the driven
    # entries wrong; the prescribed coordinates come from f(t), the rest as above
    rng = np.random.default_rng(seed + 50)
    zg = z.copy()
    zg[solver.dependent] += 0.02 * rng.uniform(-1.0, 1.0, solver.dependent.size)
    zg[driven] += 0.3
    zdg = zd.copy()
    zdg[solver.dependent] = rng.uniform(-1.0, 1.0, solver.dependent.size)
    zdg[driven] = 7.0
    z2, zd2, zdd2 = solver.solve(T0, zg, zdg)
    # every row closed at position and velocity level (the random weld's configuration is
    # closed only up to the rotation about its axis, so z2 is compared with the rows, not
    # with z), the prescribed entries exact, the accelerations the reference's there
    phi, phid = rows(cm, T0, z2, zd2)
    assert np.abs(phi).max() < 1e-12
    assert np.abs(phid).max() < 1e-12 * max(1.0, np.abs(zd2).max())
    for c in driven:
        f, fd, _ = drive_values(cm, c, T0)
        assert z2[c] == f and zd2[c] == fd
    assert np.abs(z2[solver.independent] - z[solver.independent]).max() == 0.0
    ref2, cond2 = null_space_reference(cm, T0, z2, zd2)
    assert cond2 < 1e5
    assert np.abs(zdd2 - ref2).max() / np.abs(ref2).max() < TOL


def test_a_driven_coordinate_cannot_be_a_dependent_and_cams_stay_refused():
    seed, drives, kw, _ = CASES["chain"]
    model, z = driven_loop(seed, drives, **kw)
    cm = model.compile()
    with pytest.raises(OptionError, match="driven coordinates"):
        LoopSolver(cm, ["ja1", "ja4", "ja5", "ja6", "ja7"], z0=z)
    with pytest.raises(OptionError, match="cam relation"):
        LoopSolver(wb.catalog.load("cam-follower").compile())
    # a rod with mass on the driven five-bar (point 2 = (0, 2) tied to A: no DOF left)
    m = driven_five_bar()
    m.rod("tie", "bar_12", "2", "ground", "A", mass=0.5, length=2.0)
    m.dof()
    with pytest.raises(OptionError, match="rods with mass"):
        wb.simulate(m, 0.01, 1e-3, formulation="rcr")


# ----------------------------------------------------------------------------------------
# formulation "rcr" on a driven closed mechanism
# ----------------------------------------------------------------------------------------


def driven_five_bar():
    """The catalog five-bar (2 DOF jA, jB; never singular, see its file) with its crank jA
    driven, ``jA = Adr sin(3 t)`` (``Adr`` = 0.8 rad, a model parameter): one DOF, jB."""
    m = wb.catalog.load("five-bar")
    m.parameter("Adr", 0.8, unit="rad", provenance="drive amplitude of jA: our choice")
    m.drive("crank", "jA", {"type": "sine", "amplitude": "Adr", "omega": 3.0, "phase": 0.0,
                            "offset": 0.0, "t_start": 0.0})
    m.dof("jB")
    return m


@pytest.mark.parametrize("integrator", ["trapezoidal", "rk4"])
def test_driven_five_bar_rcr_equals_matrix_r(integrator):
    """``formulation="rcr"`` on the driven five-bar, 1 s at 1 ms, against Matrix-R
    (``sr-origin``) with the same rule on the same DOF.  The trapezoidal steps are the same
    discrete solution (``R^T tau = Mbar (a - f)``), so the runs differ by what the
    tolerances leave (position 1e-12, Newton 1e-10) carried over 1000 steps: measured
    2.6e-11 in ``z``, 8.1e-11 in ``zd``, 8.3e-11 relative in ``zdd``; RK4 is the same
    explicit map: 3.2e-13, 1.6e-12, 3.8e-13.  Asserted 1e-9 in ``z`` and ``zd``, 1e-8 in
    ``zdd`` (rk4 1e-11, 1e-10)."""
    m = driven_five_bar()
    a = wb.simulate(m, 1.0, 1e-3, formulation="rcr", integrator=integrator)
    b = wb.simulate(m, 1.0, 1e-3, formulation="sr-origin", integrator=integrator)
    assert a.dof_names == b.dof_names == ("jB",)
    tol = 1e-9 if integrator == "trapezoidal" else 1e-11
    assert np.abs(a.z - b.z).max() < tol
    assert np.abs(a.zd - b.zd).max() < tol * max(1.0, np.abs(b.zd).max())
    assert np.abs(a.zdd - b.zdd).max() < 10.0 * tol * max(1.0, np.abs(b.zdd).max())
    assert a.max_constraint_violation < 1e-11
    # the crank follows its drive exactly
    jA = a.coord_names.index("jA")
    assert np.abs(a.z[:, jA] - 0.8 * np.sin(3.0 * a.t)).max() < 1e-15
    assert np.abs(a.zd[:, jA] - 2.4 * np.cos(3.0 * a.t)).max() < 1e-14
    assert np.abs(a.zdd[:, jA] + 7.2 * np.sin(3.0 * a.t)).max() < 1e-13


def test_gradients_through_a_driven_rcr_trajectory_are_exact():
    """The semi-recursive sweeps at the states of the driven five-bar's RCR trajectory
    (0.3 s): direct = adjoint to rounding, = central differences of RCR runs, = Matrix-R's
    gradient, with the drive amplitude among the parameters.  The driven crank's mass
    ``mA1`` cannot change the motion (its acceleration is prescribed; it loads only the
    drive): its gradient is zero to rounding."""
    m = driven_five_bar()
    params = ["Ls1", "Ls2", "LA1", "Adr", "mA1"]
    g = {k: wb.sensitivity(m, parameters=params, method=k, formulation="rcr", t_end=0.3,
                           dt=1e-3).gradient for k in ("direct", "adjoint", "fd")}
    gs = wb.sensitivity(m, parameters=params, method="adjoint", formulation="sr-origin",
                        t_end=0.3, dt=1e-3).gradient
    scale = np.abs(g["fd"]).max(axis=1, keepdims=True)
    assert (np.abs(g["direct"] - g["adjoint"]) / scale).max() < 1e-12
    assert (np.abs(g["direct"] - g["fd"]) / scale).max() < 1e-6
    assert (np.abs(g["adjoint"] - gs) / scale).max() < 1e-8
    assert (np.abs(g["adjoint"][:, 3]) / scale[:, 0]).min() > 1e-3
    assert (np.abs(g["adjoint"][:, 4]) / scale[:, 0]).max() < 1e-12


def test_fully_driven_quick_return_is_kinematic_and_equals_matrix_r():
    """The catalog quick-return with its DOF j3 driven (``j3 = q0 + omega0 t + t^2``): no
    DOF left, every evaluation is the position, velocity and acceleration problems alone.
    Trapezoidal rcr = Matrix-R over 0.5 s (measured 6.6e-12 in ``z``, 4.6e-11 in ``zd``:
    both solve the same closures to the position tolerance 1e-12); RK4 through RCR integrates
    nothing, so it gives the same rows (Matrix-R's RK4 refuses a model without a DOF)."""
    m = wb.catalog.load("quick-return")
    m.drive("motor", "j3", {"type": "polynomial",
                            "coefficients": [1.9513027039072615, 12.566370614359172, 1.0]})
    m.dof()
    assert m.compile().d == 0
    a = wb.simulate(m, 0.5, 1e-3, formulation="rcr")
    b = wb.simulate(m, 0.5, 1e-3, formulation="sr-origin")
    c = wb.simulate(m, 0.5, 1e-3, formulation="rcr", integrator="rk4")
    assert np.abs(a.z - b.z).max() < 1e-10
    assert np.abs(a.zd - b.zd).max() < 1e-9
    assert np.abs(c.z - a.z).max() < 1e-10
    assert np.abs(c.zdd - a.zdd).max() < 1e-8 * np.abs(a.zdd).max()
    assert a.max_constraint_violation < 1e-11


def test_rk4_without_degrees_of_freedom_is_an_option_error_in_matrix_r():
    # the fully driven quick-return: Matrix-R's RK4 has no independent coordinates to
    # integrate; a typed error naming the model (it was a ZeroDivisionError in the kernel)
    m = wb.catalog.load("quick-return")
    m.drive("motor", "j3", {"type": "polynomial",
                            "coefficients": [1.9513027039072615, 12.566370614359172, 1.0]})
    m.dof()
    with pytest.raises(OptionError, match="no degrees of freedom"):
        wb.simulate(m, 0.1, 1e-3, formulation="sr-origin", integrator="rk4")
