"""Worked tutorial of seed 000 (Yu, Mikkola, Pan, Escalona: "The explanation of two
semi-recursive multibody methods for educational purpose"), on the workbench's kernels.

Run:  python docs/tutorial/tutorial_semirecursive.py [OUTPUT_FOLDER]
(``tests/test_tutorial.py`` runs it; every check below is an assertion.)

1. The two-body system of the seed's Fig. 1 (body 1 on a revolute joint P to ground, body 2
   on a prismatic joint Q-S of body 1): the SR-I velocity transformation V (seed eqs 17-21,
   built here from the seed's explicit columns) equals the Jacobian of the workbench's
   recursion, C_q V = 0 with the seed's constraint Jacobian (eq 5), and V = D T R_d (SR-II,
   eqs 27-34).
2. SR-I and SR-II give the same mass matrix and forces (seed, after eq 55).
3. The quick-return mechanism (seed section 5, Fig. 8; reconstruction): the block pattern of
   V and of T R_d is the seed's table, and the multiplier solution (seed eqs 58-63, with
   Baumgarte stabilisation) gives the accelerations of the Matrix-R projection; figures of
   the motion and of the constraint forces.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import workbench as wb
from workbench.formulations.interface import FORM_COM, FORM_ORIGIN
from workbench.formulations.semirecursive.matrixr import full_dynamics_terms
from workbench.kernels import tree as K
from workbench.kernels.layout import PRISMATIC

I2T = np.array([[0.0, -1.0], [1.0, 0.0]])          # the seed's I~2: rotation by +90 deg
np.set_printoptions(precision=4, suppress=True, linewidth=110)


def kinematics(cm, z):
    """Frame positions, rotations and SR-II joint columns b_j of the workbench's recursion."""
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    K.frame_positions(ma, ma.p, np.asarray(z, dtype=float), A, r, u)
    K.joint_columns(ma, r, u, bcol)
    return A, r, u, bcol


def planar_jacobian(cm, z, point, body):
    """3 x n: rows x, y of a point and the body angle theta, by the workbench's recursion."""
    ma = cm.arrays
    A, r, u, bcol = kinematics(cm, z)
    Jp, Jw = np.zeros((3, cm.n)), np.zeros((3, cm.n))
    K.point_jacobian(ma, ma.p, A, r, bcol, cm.point(point), Jp)
    K.omega_jacobian(ma, bcol, cm.body_names.index(body), Jw)
    return np.vstack([Jp[:2], Jw[2:3]])


def point_xy(cm, z, point):
    ma = cm.arrays
    A, r, _, _ = kinematics(cm, z)
    x = np.zeros(3)
    K.point_position(ma, ma.p, A, r, cm.point(point), x)
    return x[:2]


def joint_frames(cm):
    """For each joint coordinate: its frame (the frame the coordinate moves)."""
    ma = cm.arrays
    return {int(ma.fr_coord[f]): f for f in range(ma.fr_parent.shape[0]) if ma.fr_coord[f] >= 0}


# ----------------------------------------------------------------------------------------
# 1. Fig. 1: two bodies, revolute P to ground, prismatic Q-S
# ----------------------------------------------------------------------------------------

def fig1_model():
    m = wb.Model("seed000-fig1", gravity=(0, -9.81, 0), planar=True,
                 provenance="seed 000 Fig. 1 topology; numbers ours")
    # body frames at the centres of mass (the reference points R_1, R_2 of SR-I)
    m.body("b1", mass=3.0, inertia=(0, 0, 0.4), points={"G": (0, 0, 0), "P": (-0.6, 0.1, 0),
                                                       "Q": (0.2, -0.1, 0)})
    m.body("b2", mass=1.5, inertia=(0, 0, 0.1), points={"G": (0, 0, 0), "S": (-0.3, 0.05, 0)})
    m.revolute("P", "ground", "b1", parent_point=(0.5, 1.0, 0), child_point="P",
               axis=(0, 0, 1), q0=0.7)
    m.prismatic("QS", "b1", "b2", parent_point="Q", child_point="S", axis=(1.0, 0.4, 0),
                q0=0.25)
    return m


def seed_V_fig1(cm, z):
    """V of seed eqs 17-21 from the positions: body 1 = [I~2 (R_1 - r_P); 1] (revolute P);
    body 2 = [I~2 (R_2 - r_P), h_1; 1, 0] (revolute P, prismatic along h_1)."""
    R1, R2 = point_xy(cm, z, "b1.G"), point_xy(cm, z, "b2.G")
    rP = point_xy(cm, z, "b1.P")
    A, _, u, _ = kinematics(cm, z)
    h1 = u[joint_frames(cm)[1]][:2]                       # the prismatic axis, global
    V = np.zeros((6, 2))
    V[0:2, 0], V[2, 0] = I2T @ (R1 - rP), 1.0
    V[3:5, 0], V[5, 0] = I2T @ (R2 - rP), 1.0
    V[3:5, 1] = h1
    return V


def seed_Cq_fig1(cm, z):
    """C_q of seed eq 5 (rows: revolute P x, y; prismatic rotation; prismatic transverse),
    columns (x1, y1, th1, x2, y2, th2); u^X = point X relative to its body's origin."""
    R1, R2 = point_xy(cm, z, "b1.G"), point_xy(cm, z, "b2.G")
    uP = point_xy(cm, z, "b1.P") - R1
    uS = point_xy(cm, z, "b2.S") - R2
    _, _, u, _ = kinematics(cm, z)
    h1 = u[joint_frames(cm)[1]][:2]
    Cq = np.zeros((4, 6))
    Cq[0:2, 0:2], Cq[0:2, 2] = np.eye(2), I2T @ uP
    Cq[2, 2], Cq[2, 5] = -1.0, 1.0
    Cq[3, 0:2] = -h1 @ I2T
    Cq[3, 2] = -h1 @ (R1 - R2 - uS)
    Cq[3, 3:5] = h1 @ I2T
    Cq[3, 5] = -h1 @ uS
    return Cq


def seed_W(cm, z):
    """SR-II: R_d = blockdiag(b_j) with b_j = [-I~2 r_j; 1] (revolute at r_j) or [h_j; 0]
    (prismatic), T the path matrix (seed eqs 27-34); returns (T, R_d) with 3 rows per body."""
    ma = cm.arrays
    A, r, u, bcol = kinematics(cm, z)
    fr = joint_frames(cm)
    nb = len(cm.body_names)
    Rd = np.zeros((3 * cm.n, cm.n))
    for c, f in fr.items():
        if ma.fr_type[f] == PRISMATIC:
            Rd[3 * c:3 * c + 2, c] = u[f][:2]                  # [h_j; 0]
        else:
            Rd[3 * c:3 * c + 2, c] = -I2T @ r[f][:2]           # [-I~2 r_j; 1], r_j on the axis
            Rd[3 * c + 2, c] = 1.0
        # the workbench's joint column b_j (seed 002 section 2.2), planar components
        assert np.allclose(Rd[3 * c:3 * c + 3, c], bcol[f, [0, 1, 5]], atol=1e-15)
    T = np.zeros((3 * nb, 3 * cm.n))
    for b in range(nb):
        f = ma.b_frame[b]
        while f >= 0:
            c = ma.fr_coord[f]
            if c >= 0:
                T[3 * b:3 * b + 3, 3 * c:3 * c + 3] = np.eye(3)
            f = ma.fr_parent[f]
    return T, Rd


def D_matrix(R):
    """SR-II -> SR-I shift of body i (seed eq 34): q_dot_i = D_i Z_dot_i."""
    D = np.eye(3)
    D[0:2, 2] = I2T @ R
    return D


def part1(out):
    cm = fig1_model().compile()
    z = np.array([0.7, 0.25])
    V_seed = seed_V_fig1(cm, z)
    V_wb = np.vstack([planar_jacobian(cm, z, "b1.G", "b1"), planar_jacobian(cm, z, "b2.G", "b2")])
    print("Fig. 1, SR-I velocity transformation V (rows x1 y1 th1 x2 y2 th2):")
    print(V_seed)
    assert np.allclose(V_wb, V_seed, atol=1e-14), "V: seed columns vs the recursion"
    Cq = seed_Cq_fig1(cm, z)
    print("C_q V (seed eq 5 times V): max |.| =", np.abs(Cq @ V_seed).max())
    assert np.abs(Cq @ V_seed).max() < 1e-14, "C_q V = 0"
    T, Rd = seed_W(cm, z)
    print("SR-II: T R_d (rows sx sy th per body):")
    print(T @ Rd)
    DTRd = np.vstack([D_matrix(point_xy(cm, z, f"{b}.G")) @ (T @ Rd)[3 * i:3 * i + 3]
                      for i, b in enumerate(cm.body_names)])
    assert np.allclose(DTRd, V_seed, atol=1e-14), "V = D T R_d"
    print("checked: V (seed) = workbench recursion, C_q V = 0, V = D T R_d")


# ----------------------------------------------------------------------------------------
# 2. SR-I and SR-II give the same mass matrix and forces
# ----------------------------------------------------------------------------------------

def part2(out):
    cm = wb.catalog.load("quick-return").compile()
    rng = np.random.default_rng(0)
    z, zd, zdd = rng.normal(size=(3, cm.n))
    M1, tau1 = full_dynamics_terms(cm.arrays, cm.arrays.p, FORM_COM, 0.0, z, zd, zdd)
    M2, tau2 = full_dynamics_terms(cm.arrays, cm.arrays.p, FORM_ORIGIN, 0.0, z, zd, zdd)
    print("quick-return, open tree at a random state: SR-I mass matrix")
    print(M1)
    print("max |M_SR-I - M_SR-II| =", np.abs(M1 - M2).max(),
          " max |tau_SR-I - tau_SR-II| =", np.abs(tau1 - tau2).max())
    assert np.allclose(M1, M2, atol=1e-12) and np.allclose(tau1, tau2, atol=1e-11)
    print("checked: SR-I and SR-II give the same M and tau = M zdd - Q")


# ----------------------------------------------------------------------------------------
# 3. The quick-return mechanism
# ----------------------------------------------------------------------------------------

#: the seed's table of V for the quick-return mechanism: joints used by each body's rows
SEED_PATTERN = {"rocker": {0}, "slider": {0, 1}, "crank": {0, 1, 2}, "link": {0, 3},
                "ram": {0, 3, 4}}


def part3(out):
    model = wb.catalog.load("quick-return")
    for b in model.bodies:
        if b != "ground":
            model.point(b, "G", model.bodies[b].com)
    cm = model.compile()
    z = cm.z_guess
    V = np.vstack([planar_jacobian(cm, z, f"{b}.G", b) for b in cm.body_names])
    T, Rd = seed_W(cm, z)
    W = T @ Rd
    print("quick-return: SR-I V (15 x 5; columns j1 .. j5):")
    print(V)
    for i, b in enumerate(cm.body_names):
        used = {j for j in range(cm.n) if np.abs(V[3 * i:3 * i + 3, j]).max() > 0}
        usedW = {j for j in range(cm.n) if np.abs(W[3 * i:3 * i + 3, j]).max() > 0}
        assert used == SEED_PATTERN[b] == usedW, (b, used, usedW)
    print("checked: the block pattern of V and of T R_d is the seed's table")
    # the multiplier solution against the Matrix-R projection
    mr = wb.simulate(cm, 1.0, 1e-3, "sr-com")
    mu = wb.simulate(cm, 1.0, 1e-3, "multipliers")
    da0 = np.abs(mu.zdd[0] - mr.zdd[0]).max()
    print("initial accelerations, multipliers vs Matrix-R: max |difference| =", da0)
    assert da0 < 1e-9 * max(1.0, np.abs(mr.zdd[0]).max())
    dz = np.abs(mu.z - mr.z).max()
    print(f"over 1 s: max |z_multipliers - z_Matrix-R| = {dz:.2e} (the integrators' error), "
          f"max |Phi| of the multipliers run = {mu.constraint_violation.max():.2e}")
    assert dz < 1e-2 and mu.constraint_violation.max() < 1e-4
    figures(cm, mr, mu, out)


def figures(cm, mr, mu, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    crank = mr.coordinate("j1") + mr.coordinate("j3")
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].plot(np.degrees(crank), np.degrees(mr.coordinate("j1")), label="Matrix-R (sr-com)")
    ax[0].plot(np.degrees(mu.coordinate("j1") + mu.coordinate("j3")),
               np.degrees(mu.coordinate("j1")), "--", label="multipliers + Baumgarte")
    ax[0].set_xlabel("crank angle [deg]")
    ax[0].set_ylabel("rocker angle j1 [deg]")
    ax[0].set_title("quick-return: rocker against crank")
    ax[0].legend(fontsize=8)
    lam = mu.multipliers
    names = [f"{c} #{k + 1}" for k, c in enumerate(cm.constraint_names)]
    for k in range(lam.shape[1]):
        ax[1].plot(mu.t, -lam[:, k], label=names[k])
    ax[1].set_xlabel("t [s]")
    ax[1].set_ylabel("-lambda (force on body 1 of the cut)")
    ax[1].set_title("constraint forces of the cut joints D and E")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "quick_return_tutorial.png", dpi=110)
    plt.close(fig)
    print(f"wrote {out / 'quick_return_tutorial.png'}")


# ----------------------------------------------------------------------------------------
# 4. Coordinate partitioning, the seed's baseline (eqs 2-8)
# ----------------------------------------------------------------------------------------

def partition_matrix(Cq, indep):
    """H = [-C_qd^-1 C_qi; I] (seed eq 8, rows put back in the order of q): q_dot = H
    q_dot^i for the independent coordinates ``indep``."""
    n = Cq.shape[1]
    dep = [k for k in range(n) if k not in indep]
    H = np.zeros((n, len(indep)))
    H[dep] = -np.linalg.solve(Cq[:, dep], Cq[:, indep])
    H[indep] = np.eye(len(indep))
    return H


def part4(out):
    import scipy.linalg
    cm = fig1_model().compile()
    z = np.array([0.7, 0.25])
    Cq = seed_Cq_fig1(cm, z)
    names = ["x1", "y1", "th1", "x2", "y2", "th2"]
    # Gaussian elimination with column pivoting of C_q (LU of C_q^T with row pivoting): the
    # pivot columns are the dependent coordinates, the others independent
    P, _, _ = scipy.linalg.lu(Cq.T)
    order = np.argmax(P, axis=0)                  # P^T Cq^T = L U: pivot row order
    dep = sorted(int(k) for k in order[:Cq.shape[0]])
    indep = [k for k in range(6) if k not in dep]
    H = partition_matrix(Cq, indep)
    print("coordinate partitioning of Fig. 1: independent", [names[k] for k in indep])
    print("H (seed eq 8):")
    print(H)
    assert np.abs(Cq @ H).max() < 1e-14, "C_q H = 0"
    V = seed_V_fig1(cm, z)
    # the same velocity space as V: V = H V^i (V^i the rows of V of the independent ones)
    assert np.allclose(H @ V[indep], V, atol=1e-14), "V = H V^i"
    # the seed's remark: th1 and th2 cannot both be independent (C_qd singular)
    bad = [names.index("th1"), names.index("th2")]
    dep_bad = [k for k in range(6) if k not in bad]
    sv = np.linalg.svd(Cq[:, dep_bad], compute_uv=False)
    print(f"with th1, th2 independent: smallest singular value of C_qd = {sv[-1]:.1e}")
    assert sv[-1] < 1e-12, "th1, th2 both independent: C_qd singular"
    print("checked: C_q H = 0, V = H V^i, th1 and th2 cannot both be independent")
    # the product's coordinate partitioning in natural coordinates on the quick-return
    qr = wb.catalog.load("quick-return").compile()
    part = wb.simulate(qr, 1.0, 1e-3, "global-partitioned")
    mr = wb.simulate(qr, 1.0, 1e-3, "sr-com")
    dz = np.abs(part.z - mr.z).max()
    print(f"quick-return, global-partitioned vs Matrix-R over 1 s: max |dz| = {dz:.1e} "
          f"(different integrated coordinates: the rule's O(h^2) difference), "
          f"{len(part.partition_changes)} re-selections of the independent coordinate")
    assert dz < 5e-3 and part.max_constraint_violation < 1e-10


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    part1(out)
    part2(out)
    part3(out)
    part4(out)
    print("all checks passed")


if __name__ == "__main__":
    main()
