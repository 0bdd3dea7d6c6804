"""The reverse-mode (vector-Jacobian) kernels of :mod:`workbench.kernels.cotangents`
against two independent references: central differences of the residual ``tau``
computed by the inverse dynamics, and the forward-mode step Jacobians (every field a
parameter, the geometric ones included)."""

import numpy as np
import pytest
from conftest import random_tree

from workbench.apps.peers_bench import open_chain
from workbench.compiled.parameters import kinematic_parameters
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.kernels import cotangents as CT


def _sprung_tree(seed):
    """A random open tree with every joint type (auxiliary frames, prismatic and fixed
    joints, full inertia tensors, gravity along a random direction) and joint
    spring-dampers on its first three joints that have a coordinate."""
    m = random_tree(seed)
    for j in list(m.joints)[:3]:
        if m.joints[j].type != "fixed":
            m.joint_spring(f"js{j}", j, k=7.0, c=0.5, q0=0.3)
    return m


def _vjp(ma, p, z, zd, zdd, v):
    n = z.shape[0]
    out = (np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(p.shape[0]))
    CT.virtual_power_gradient_r(ma, p, z, zd, zdd, v, *out)
    return out


@pytest.mark.parametrize("seed", [3, 5])
def test_virtual_power_gradient_matches_central_differences_of_tau(seed):
    cm = _sprung_tree(seed).compile()
    ma = cm.arrays
    p = ma.p.copy()
    assert CT.virtual_power_supported(ma)
    rng = np.random.default_rng(seed)
    x = [rng.normal(size=cm.n) for _ in range(3)] + [p]
    v = rng.normal(size=cm.n)
    grads = _vjp(ma, p, *x[:3], v)

    def vtau(args):
        z, zd, zdd, pp = args
        return v @ MR.full_dynamics_terms(ma, pp, 1, 0.0, z, zd, zdd)[1]

    h = 1e-6
    for k, g in enumerate(grads):
        fd = np.zeros_like(g)
        for i in range(g.shape[0]):
            hi, lo = list(x), list(x)
            hi[k] = x[k].copy()
            lo[k] = x[k].copy()
            hi[k][i] += h
            lo[k][i] -= h
            fd[i] = (vtau(hi) - vtau(lo)) / (2 * h)
        # central differences with h = 1e-6: truncation ~h^2 and rounding ~1e-16/h of
        # O(10) values, ~1e-9 absolute; 1e-7 of the largest entry leaves margin, and any
        # missing term is O(1)
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-7 * np.abs(fd).max())
    # the fields nothing reads (e.g. points no element uses) get exact zeros
    assert np.count_nonzero(grads[3]) < p.shape[0]


@pytest.mark.parametrize("case", ["tree3", "tree5", "chain5", "chain20"])
@pytest.mark.parametrize("form", [MR.FORM_ORIGIN, MR.FORM_COM])
def test_one_reverse_pass_gives_the_transposed_step_jacobians(case, form):
    """``K^T v``, ``C^T v``, ``Mbar^T v`` and ``P^T v`` (every field a parameter, so the
    joint locations and the bodies' offsets move the configuration) from one reverse
    pass equal the forward step Jacobians' columns contracted with ``v``."""
    cm = (_sprung_tree(int(case[4:])) if case.startswith("tree")
          else open_chain(int(case[5:]))).compile()
    ma = cm.arrays
    p = ma.p
    n, d, nfield = cm.n, cm.d, p.shape[0]
    rng = np.random.default_rng(2)
    zi, zdi, a = rng.normal(size=d) * 0.5, rng.normal(size=d), rng.normal(size=d)
    z = cm.z_guess.copy()
    MR.coordinate_position(ma, p, zi, z, MR.make_workspace(ma, n))
    Gm = np.eye(nfield)
    pkin = kinematic_parameters(cm, Gm)
    assert pkin.any()
    Jr, Mb = np.zeros((d, 2 * d + nfield)), np.zeros((d, d))
    R, zd, zdd = np.zeros((n, d)), np.zeros(n), np.zeros(n)
    e = np.zeros(0, dtype=np.int64)
    st = S.step_jacobians(ma, p, form, 0.0, zi, zdi, a, z, Gm, pkin,
                          np.zeros(nfield, dtype=np.int64), e, e, e, Jr, Mb,
                          np.zeros((0, 3 * d + nfield)), np.zeros(0), R, zd, zdd)
    assert st == MR.OK
    v = rng.normal(size=d)
    zb, zdb, zddb, pb = _vjp(ma, p, z, zd, zdd, R @ v)
    # two exact evaluations of the same derivatives in different orders: rounding only
    # (measured <= 3e-15 relative); 1e-12 as for direct = adjoint
    for rev, fwd in ((R.T @ zb, v @ Jr[:, :d]), (R.T @ zdb, v @ Jr[:, d:2 * d]),
                     (R.T @ zddb, v @ Mb), (pb, v @ Jr[:, 2 * d:])):
        np.testing.assert_allclose(rev, fwd, rtol=0, atol=1e-12 * np.abs(fwd).max())


def test_models_with_other_loads_are_not_claimed():
    cm = random_tree(3, forces=True).compile()
    assert not CT.virtual_power_supported(cm.arrays)
