"""What the semi-recursive position problem reuses between evaluations, and the kernels'
temporaries on the stack, checked against the full computations they stand for.

* After a Newton correction of the position problem only the frames below the coordinates
  it moved are recomputed (:func:`workbench.kernels.tree.frame_positions` with ``dz``):
  the reference is the full recursion at the new position, bit for bit.
* A later Newton iterate of the trapezoidal rule starts its position problem at the
  position the last one returned (``same``: only ``z^i`` moved); the reference is the same
  problem solved from a fresh evaluation, bit for bit.
* The model-sized temporaries of the hot kernels live in stack buffers of a bound and on
  the heap beyond it (:func:`workbench.kernels.layout.take1` / ``take2``): the mass
  matrix and the inverse dynamics of chains on both sides of the bound (10 and 70 bodies)
  against the kinetic energy summed body by body and the linearity of ``tau`` in the
  accelerations.
"""

import numpy as np
import pytest
from numba import njit

from workbench import simulate
from workbench.apps.bench import closed_chain
from workbench.apps.vehicle import prepare
from workbench.formulations.interface import FORM_COM, FORM_ORIGIN
from workbench.formulations.semirecursive import matrixr as MR
from workbench.kernels import layout as AR
from workbench.kernels import tree as K
from workbench.model.builder import Model
from workbench.model.elements import GROUND


@pytest.fixture(scope="module")
def runs():
    buggy = prepare("buggy-dlc")
    bc = buggy.compile()
    cc = closed_chain(10).compile()
    h_b = float(buggy.meta["dt"])
    return {"buggy": (bc, simulate(bc, 60 * h_b, h_b)), "closed chain": (cc, simulate(cc, 0.1, 1e-3))}


def _frames(cm, z):
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    K.frame_positions(ma, ma.p, z, A, r, u)
    return A, r, u


@pytest.mark.parametrize("name", ["buggy", "closed chain"])
def test_partial_frame_update_gives_the_bits_of_the_full_recursion(runs, name):
    """Frames whose root path holds a moved coordinate are recomputed (the flags are checked
    against the tree walked here), the others keep their bits; every frame then equals the
    full recursion at the new position exactly."""
    cm, sim = runs[name]
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    rng = np.random.default_rng(7)
    z0 = sim.z[-1].copy()
    for trial in range(6):
        dz = np.zeros(cm.n)
        moved_coords = rng.choice(cm.n, size=1 + trial % 3, replace=False)
        dz[moved_coords] = 1e-3 * rng.standard_normal(moved_coords.size)
        z1 = z0 + dz
        A, r, u = _frames(cm, z0)
        flags = np.zeros(nf, dtype=np.bool_)
        K.frame_positions(ma, ma.p, z1, A, r, u, dz, flags)
        A1, r1, u1 = _frames(cm, z1)
        assert np.array_equal(A, A1) and np.array_equal(r, r1) and np.array_equal(u, u1)
        below = np.zeros(nf, dtype=bool)
        for f in range(nf):
            g = f
            while g >= 0:
                if ma.fr_coord[g] >= 0 and dz[ma.fr_coord[g]] != 0.0:
                    below[f] = True
                g = ma.fr_parent[g]
        assert np.array_equal(flags, below)
        assert 0 < below.sum() <= nf


@pytest.mark.parametrize("name", ["buggy", "closed chain"])
def test_position_problem_started_from_the_last_solution_repeats_a_fresh_solve(runs, name):
    """A later Newton iterate: ``z^i`` moves (here by ``1e-6`` on every DOF), ``z`` stays.
    Solved with ``same`` (the constraint and DOF values of the last solve reused) and from a
    fresh workspace, the positions, iteration counts and residuals are the same bits."""
    cm, sim = runs[name]
    ma, p = cm.arrays, cm.arrays.p
    k = len(sim.t) - 1
    t = float(sim.t[k])
    ws = MR.make_workspace(ma, cm.n)
    z = sim.z[k].copy()
    st, _, _, _ = MR.solve_position(ma, p, t, sim.zi[k], z, ws, 1e-10, 20, False)
    assert st == MR.OK
    # the velocity problem rewrites the DOF values with the same bits (it runs between two
    # Newton iterates in the integrator)
    R = np.zeros((cm.n, cm.d))
    assert MR.factor_r(ma, p, z, R, ws)[0] == MR.OK
    MR.velocity_acceleration(ma, p, t, sim.zi[k], sim.zdi[k], z, np.zeros(cm.n),
                             np.zeros(cm.n), ws)
    zi = sim.zi[k] + 1e-6
    z_same = z.copy()
    out_same = MR.solve_position(ma, p, t, zi, z_same, ws, 1e-10, 20, False, None, True)
    ws2 = MR.make_workspace(ma, cm.n)
    z_fresh = z.copy()
    out_fresh = MR.solve_position(ma, p, t, zi, z_fresh, ws2, 1e-10, 20, False)
    assert out_same[0] == MR.OK and out_same[1] >= 1
    assert out_same == out_fresh
    assert np.array_equal(z_same, z_fresh)


def _spatial_chain(n):
    """``n`` bodies in a chain of revolute joints about z, y, x in turn (off-axis centres of
    mass): a spatial tree with as many frames and coordinates as bodies."""
    m = Model(f"chain-{n}", gravity=(0.0, 0.0, -9.81))
    parent = GROUND
    axes = ((0, 0, 1), (0, 1, 0), (1, 0, 0))
    for i in range(n):
        b = f"b{i}"
        m.body(b, 1.0 + 0.01 * i, com=(0.1, 0.02, -0.01), inertia=(0.02, 0.03, 0.04),
               points={"tip": (0.2, 0.0, 0.0)})
        m.revolute(f"j{i}", parent, b, parent_point=(0.0, 0.0, 0.0) if i == 0 else "tip",
                   axis=axes[i % 3], q0=0.1 * np.sin(i))
        parent = b
    return m.compile()


_B4 = AR.scratch(4)


@njit
def _take(k):
    buf = _B4()
    buf[:] = -1.0
    v = AR.take1(buf, k)
    v[:] = 2.0
    return buf[0], v.shape[0]


def test_take_cuts_the_buffer_within_its_bound_and_allocates_beyond():
    assert _take(3) == (2.0, 3)      # a view: the buffer was written
    assert _take(9) == (-1.0, 9)     # a new array: the buffer untouched


@pytest.mark.parametrize("n", [10, 70])
@pytest.mark.parametrize("form", [FORM_COM, FORM_ORIGIN])
def test_mass_matrix_and_inverse_dynamics_on_both_sides_of_the_stack_bound(n, form):
    """70 frames and coordinates exceed the stack buffers (64): the heap path must give what
    the stack path gives for 10.  ``zd^T M zd / 2`` equals the kinetic energy summed body by
    body (``tree.kinetic_energy``, no composite inertias), and ``tau(zdd) - tau(0) = M zdd``
    (``tau`` is linear in the accelerations).  Tolerances: rounding of sums over ~n^2
    terms."""
    cm = _spatial_chain(n)
    ma, p = cm.arrays, cm.arrays.p
    rng = np.random.default_rng(n)
    z = np.asarray(cm.z_guess, dtype=float) + 0.3 * rng.standard_normal(n)
    zd = rng.standard_normal(n)
    zdd = rng.standard_normal(n)
    ws = MR.make_workspace(ma, n)
    K.frame_positions(ma, p, z, ws.A, ws.r, ws.u)
    K.joint_columns(ma, ws.r, ws.u, ws.bcol)
    M = np.zeros((n, n))
    MR.mass_matrix(ma, p, ws, form, n, M)
    K.frame_velocities(ma, zd, ws.bcol, ws.Z)
    T = K.kinetic_energy(ma, p, ws.A, ws.r, ws.Z)
    assert 0.5 * zd @ M @ zd == pytest.approx(T, rel=1e-12)
    tau1, tau0 = np.zeros(n), np.zeros(n)
    MR.residual_tau(ma, p, 0.0, z, zd, zdd, ws, form, tau1)
    MR.residual_tau(ma, p, 0.0, z, zd, np.zeros(n), ws, form, tau0)
    np.testing.assert_allclose(tau1 - tau0, M @ zdd, rtol=0,
                               atol=1e-11 * np.abs(M).max() * np.abs(zdd).sum())
