"""The Magic Formula 5.2 law in the model's tire element (workbench/forces/tire_mf.py): the
element against the pure law of the same inputs, its exact Jacobian against central
differences, the wrench in both formulation families against the accelerations of a
side-slip rig computed by hand, rolling / braking / cornering physics, exact design
sensitivities through the law (direct = adjoint = central differences, MF coefficients among
the parameters), and the builder / file format."""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from workbench import Model, ModelError, UnknownNameError
from workbench import objectives as O
from workbench import simulate
from workbench.apps import vehicle
from workbench.forces import tire as T
from workbench.forces import tire_mf as TL
from workbench.forces.magic_formula import (COEFFICIENT_NAMES, DEFAULT_V_EPS, coefficient_index,
                                            mf52_forces)
from workbench.forces.tir import EXAMPLE_TIR, read_tir
from workbench.model import catalog
from workbench.model.elements import GROUND
from workbench.model.files import load_model, model_from_dict
from workbench.model.serialize import model_to_dict
from workbench.sensitivities.driver import sensitivity

PM = read_tir(EXAMPLE_TIR).array
IDX = coefficient_index()
# R, k, c, mu (unused), v_eps, depth_ramp, force_ramp, then the 108 MF coefficients
TP = np.concatenate([[0.313, 2.0e5, 400.0, 0.8, 0.5, 1e-3, 10.0], PM])
# base height 2 cm, a 1 cm step down centred at 5.5 m over 0.1 m
ROAD = np.array([0.02, 5.5, -0.01, 0.1])
NX = 12 + len(TP)

#: the shifts of the shipped set (zero-slip forces); zeroed for the symmetric tire
SHIFTS = ("PHX1", "PHX2", "PVX1", "PVX2", "PHY1", "PHY2", "PHY3", "PVY1", "PVY2", "PVY3",
          "PVY4", "RHX1", "RHY1", "RHY2", "RVY1", "RVY2", "RVY3", "RVY4", "QHZ1", "QHZ2",
          "QHZ3", "QHZ4", "SSZ1", "SSZ2", "SSZ3", "SSZ4", "QDZ6", "QDZ7", "QDZ8", "QDZ9")


def element(X, road=ROAD):
    F, P, M = np.zeros(3), np.zeros(3), np.zeros(3)
    out = TL.mf_tire_force(X[0:3], X[3:6], X[6:9], X[9:12], X[12:NX], road, F, P, M)
    return np.concatenate([F, P, M]), out


def state(axis=(0.05, 1.0, 0.08), x=5.47, height=0.30, vc=(8.0, 0.6, -0.1),
          w=(0.3, 24.0, -0.4)):
    a = np.array(axis) / np.linalg.norm(axis)
    return np.concatenate([[x, 0.1, height], vc, a, w, TP])


# ----------------------------------------------------------------------------------------
# the element kernel
# ----------------------------------------------------------------------------------------


def test_element_is_the_magic_formula_of_the_contact_inputs():
    """Flat road, steer psi and camber gamma built by hand: the element force and moment
    are ``N n + Fx l + Fy s`` and ``Mz n`` with (Fx, Fy, Mz) = mf52_forces of the slips and
    inclination computed from the definitions (the element adds no error)."""
    R, ve = TP[0], TP[4]
    road = np.zeros(0)
    for psi, gam, V, wr, vy in ((0.1, 0.04, 12.0, 0.97, 0.0), (-0.2, -0.03, 5.0, 1.05, 0.4),
                                (0.0, 0.0, 0.3, 0.5, -0.1)):
        a = np.array([-math.sin(psi) * math.cos(gam), math.cos(psi) * math.cos(gam),
                      math.sin(gam)])
        lvec = np.array([math.cos(psi), math.sin(psi), 0.0])
        svec = np.array([-math.sin(psi), math.cos(psi), 0.0])
        delta = 0.015
        c = np.array([1.0, 2.0, R * math.cos(gam) - delta])    # lowest point delta deep
        vc = V * lvec + vy * svec
        om = wr * V / R
        w = om * a
        X = np.concatenate([c, vc, a, w, TP])
        out, (dl, N, kappa, alpha, gamma) = element(X, road)
        # hand-computed inputs: N = k delta (no penetration rate), V_x = V, V_y = vy,
        # V_r = omega R, V_d = sqrt(V^2 + v_eps^2)
        assert dl == pytest.approx(delta, rel=1e-12)
        assert N == pytest.approx(TP[1] * delta, rel=1e-12)
        Vd = math.sqrt(V * V + ve * ve)
        k_ref, a_ref = (om * R - V) / Vd, math.atan(vy / Vd)
        assert kappa == pytest.approx(k_ref, abs=1e-14) and alpha == pytest.approx(a_ref,
                                                                                   abs=1e-14)
        assert gamma == pytest.approx(gam, abs=1e-14)
        Fm = np.zeros(3)
        mf52_forces(TP[1] * delta, k_ref, a_ref, gam, PM, Fm)
        F_ref = TP[1] * delta * np.array([0, 0, 1.0]) + Fm[0] * lvec + Fm[1] * svec
        np.testing.assert_allclose(out[0:3], F_ref, rtol=0, atol=1e-11 * np.abs(F_ref).max())
        np.testing.assert_allclose(out[6:9], [0, 0, Fm[2]], rtol=0, atol=1e-11 * abs(Fm[2]))
        # the application point is the lowest point of the disc
        np.testing.assert_allclose(out[3:6], c - R * np.array(
            [-math.sin(gam) * svec[0], -math.sin(gam) * svec[1], math.cos(gam)]), atol=1e-14)


def test_element_jacobian_matches_central_differences():
    """Every column of X = [c, vc, a, w, tp (7 + 108 coefficients), road] at a state on the
    ramp of a road step, with camber, slip, a penetration rate and a tilted normal."""
    X = np.concatenate([state(), ROAD])
    nX = len(X)
    F, P, M = np.zeros(3), np.zeros(3), np.zeros(3)
    JF, JP, JM = (np.zeros((3, nX)) for _ in range(3))
    dl, N = TL.mf_tire_force_jacobian(X[0:3], X[3:6], X[6:9], X[9:12], X[12:NX], X[NX:],
                                      F, P, M, JF, JP, JM)
    assert dl > 1e-3 and N > 1000.0                       # in contact, past the ramps
    out, (_, _, kappa, alpha, gamma) = element(X[:NX], X[NX:])
    assert abs(kappa) > 0.02 and abs(alpha) > 0.02 and abs(gamma) > 0.02
    J = np.vstack([JF, JP, JM])

    def fun(Xv):
        return element(Xv[:NX], Xv[NX:])[0]
    worst = 0.0
    for j in range(nX):
        h = 1e-5 * (abs(X[j]) if X[j] != 0 else 1.0)

        def cd(hh):
            Xp, Xm = X.copy(), X.copy()
            Xp[j] += hh
            Xm[j] -= hh
            return (fun(Xp) - fun(Xm)) / (2 * hh)
        ref = (4 * cd(h / 2) - cd(h)) / 3                  # Richardson: O(h^4) + rounding
        scale = max(np.abs(ref).max(), 1e-8 * np.abs(J).max() / max(abs(X[j]), 1.0))
        err = np.abs(J[:, j] - ref).max() / scale
        worst = max(worst, err)
        # 1e-6: Richardson central differences with relative steps 1e-5 (rounding
        # ~1e-16 |F| / h); the floor covers the columns that vanish analytically
        assert err < 1e-6, (j, err, J[:, j], ref)
    # the state columns of the Newton matrix are the same numbers
    JF2, JP2, JM2 = (np.zeros((3, T.NX_STATE)) for _ in range(3))
    TL.element_wrench_state_jacobian(TL.LAW_MF, X[0:3], X[3:6], X[6:9], X[9:12], X[12:NX],
                                     X[NX:], F, P, M, JF2, JP2, JM2)
    np.testing.assert_array_equal(JF2, JF[:, :12])


def test_disc_law_through_the_dispatchers_is_unchanged():
    tp = TP[:T.TY_NPAR].copy()
    tp[4] = 0.1
    X = state()[:12]
    dX = np.random.default_rng(3).standard_normal(12 + T.TY_NPAR + len(ROAD))
    args = (X[0:3], X[3:6], X[6:9], X[9:12], tp, ROAD, dX[0:3], dX[3:6], dX[6:9], dX[9:12],
            dX[12:19], dX[19:])
    F, P, dF, dP = (np.zeros(3) for _ in range(4))
    T.tire_force_dir(*args, F, P, dF, dP)
    F2, P2, M2, dF2, dP2, dM2 = (np.ones(3) for _ in range(6))
    TL.element_force_dir(TL.LAW_DISC, *args, F2, P2, M2, dF2, dP2, dM2)
    for u, v in ((F, F2), (P, P2), (dF, dF2), (dP, dP2)):
        np.testing.assert_array_equal(u, v)
    assert not M2.any() and not dM2.any()
    assert np.abs(F).max() > 100.0                        # in contact
    T.tire_force(X[0:3], X[3:6], X[6:9], X[9:12], tp, ROAD, F, P)
    M2[:] = 1.0
    TL.element_force(TL.LAW_DISC, X[0:3], X[3:6], X[6:9], X[9:12], tp, ROAD, F2, P2, M2)
    np.testing.assert_array_equal(F, F2)
    np.testing.assert_array_equal(P, P2)
    assert not M2.any()


@pytest.mark.parametrize("law", ["mf", "disc"])
@pytest.mark.parametrize("height", [0.30, 0.5])
def test_wrench_state_jacobian_times_a_direction_is_its_directional_derivative(law, height):
    """The step Jacobians take the tire tangent of a state direction (no tire or road field
    moved) as ``J dX`` from :func:`element_wrench_state_jacobian` evaluated once per row:
    against the forward-mode directional derivative of the element along the same ``dX``,
    for both laws, in contact and out of it (height 0.5 m)."""
    code = TL.LAW_MF if law == "mf" else TL.LAW_DISC
    tp = TP.copy() if law == "mf" else TP[:T.TY_NPAR].copy()
    X = state(height=height)[:12]
    F, P, M = np.zeros(3), np.zeros(3), np.zeros(3)
    JF, JP, JM = (np.zeros((3, 12)) for _ in range(3))
    dl, _ = TL.element_wrench_state_jacobian(code, X[0:3], X[3:6], X[6:9], X[9:12], tp, ROAD,
                                             F, P, M, JF, JP, JM)
    assert (dl > 1e-3) == (height < 0.4)
    rng = np.random.default_rng(7)
    for _ in range(5):
        dX = rng.standard_normal(12)
        F2, P2, M2, dF, dP, dM = (np.full(3, np.nan) for _ in range(6))
        TL.element_force_dir(code, X[0:3], X[3:6], X[6:9], X[9:12], tp, ROAD, dX[0:3],
                             dX[3:6], dX[6:9], dX[9:12], np.zeros(len(tp)),
                             np.zeros(len(ROAD)), F2, P2, M2, dF, dP, dM)
        for u, v in ((F, F2), (P, P2), (M, M2)):
            np.testing.assert_array_equal(u, v)
        # 1e-12: the same exact chain rule summed in another order (rounding of |J| |dX|)
        for J, ref in ((JF, dF), (JP, dP), (JM, dM)):
            scale = np.abs(J).sum(axis=1).max() * np.abs(dX).max() + 1e-300
            assert np.abs(J @ dX - ref).max() <= 1e-12 * scale, (J @ dX, ref)


def test_out_of_contact_everything_vanishes():
    X = state(height=0.5)
    rng = np.random.default_rng(1)
    dX = rng.standard_normal(NX + len(ROAD))
    F, P, M, dF, dP, dM = (np.zeros(3) for _ in range(6))
    dl, N, _, _, _ = TL.mf_tire_force_dir(X[0:3], X[3:6], X[6:9], X[9:12], X[12:], ROAD,
                                          dX[0:3], dX[3:6], dX[6:9], dX[9:12], dX[12:NX],
                                          dX[NX:], F, P, M, dF, dP, dM)
    assert dl < 0 and N == 0
    for v in (F, M, dF, dM):
        assert not v.any()


# ----------------------------------------------------------------------------------------
# a side-slip rig: carrier on prismatic x, y, z, wheel spinning about a steered and cambered
# axis; the initial accelerations give the contact wrench by hand
# ----------------------------------------------------------------------------------------

# carrier and wheel: 400 kg in all, static on the tire at delta = 400 g / KT = 19.6 mm
MC, MW, IW = 390.0, 10.0, (0.4, 0.6, 0.4)
KT, R0 = 2.0e5, 0.313


def rig(psi=0.1, gam=0.03, V=15.0, wr=1.0, delta=0.02, law="magic-formula", brake=0.0,
        coefficients=None):
    """Carrier (mass MC) on prismatic x, y, z (x moving at V), wheel (mass MW, inertia IW,
    spin axis body y) on a revolute whose axis is steered by ``psi`` and cambered by
    ``gam``: spin axis a = Rz(psi) Rx(gam) e_y, heading l = (cos psi, sin psi, 0).  The
    lowest point starts ``delta`` below the flat road, the wheel spins at ``wr V / R``."""
    m = Model("side-slip-rig", gravity=(0.0, 0.0, -9.81))
    m.parameter("kt", KT, "N/m", "test value")
    m.parameter("mux", PM[IDX["PDX1"]], "1", "test value: PDX1 of the shipped set")
    m.parameter("cky", PM[IDX["PKY1"]], "1", "test value: PKY1 of the shipped set")
    cp, sp, cg, sg = math.cos(psi), math.sin(psi), math.cos(gam), math.sin(gam)
    Rz = np.array([[cp, -sp, 0.0], [sp, cp, 0.0], [0.0, 0.0, 1.0]])
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, cg, -sg], [0.0, sg, cg]])
    m.body("cx", mass=0.0)
    m.body("cy", mass=0.0)
    m.body("carrier", mass=MC, inertia=(1.0, 1.0, 1.0))
    m.body("wheel", mass=MW, inertia=IW, points={"C": (0.0, 0.0, 0.0)},
           vectors={"spin": (0.0, 1.0, 0.0)})
    m.prismatic("x", GROUND, "cx", axis=(1, 0, 0), qd0=V)
    m.prismatic("y", "cx", "cy", axis=(0, 1, 0))
    m.prismatic("z", "cy", "carrier", axis=(0, 0, 1), q0=R0 * cg - delta)
    m.revolute("spin", "carrier", "wheel", axis=tuple(Rz @ Rx @ np.array([0.0, 1.0, 0.0])),
               orientation=(Rz @ Rx).tolist(), qd0=wr * V / R0)
    coefs = {"PDX1": "mux", "PKY1": "cky"}
    coefs.update(coefficients or {})
    if law == "disc":
        m.tire("tire", "wheel", "C", "spin", radius=R0, k="kt", c=0.0)
    else:
        m.tire("tire", "wheel", "C", "spin", radius=R0, k="kt", c=0.0, law=law,
               tir="mf52_205_60R15", coefficients=coefs)
    if brake:
        a = Rz @ Rx @ np.array([0.0, 1.0, 0.0])
        m.torque("brake", "wheel", tuple(-a), brake)
    return m


def rig_reference(psi, gam, V, wr, delta, pm=PM):
    """Initial accelerations of :func:`rig` from the definitions: (x, y, z, spin)."""
    ve = DEFAULT_V_EPS
    N = KT * delta
    Vx, Vy = V * math.cos(psi), -V * math.sin(psi)
    Vd = math.sqrt(Vx * Vx + ve * ve)
    kappa, alpha = (wr * V - Vx) / Vd, math.atan(Vy / Vd)
    Fm = np.zeros(3)
    mf52_forces(N, kappa, alpha, gam, pm, Fm)
    Fx, Fy, Mz = Fm
    mt = MC + MW
    F = np.array([Fx * math.cos(psi) - Fy * math.sin(psi),
                  Fx * math.sin(psi) + Fy * math.cos(psi), N])
    acc = np.array([F[0] / mt, F[1] / mt, F[2] / mt - 9.81,
                    (-R0 * Fx + Mz * math.sin(gam)) / IW[1]])
    return acc, (N, kappa, alpha, Fx, Fy, Mz)


def initial_acceleration(model, formulation):
    sim = simulate(model, 1e-4, 1e-4, formulation=formulation)
    cm = model.compile()
    return np.array([sim.zdd[0, cm.coordinate(nm)] for nm in ("x", "y", "z", "spin")])


@pytest.mark.parametrize("formulation", ["sr-com", "sr-origin", "global"])
def test_rig_accelerations_are_the_hand_computed_wrench(formulation):
    """Force at the contact point and the aligning moment as a torque: the translations
    give F = N n + Fx l + Fy s, the spin I a_spin = -R Fx + Mz sin(gamma) (the moment's
    component along the cambered spin axis: Mz is applied)."""
    psi, gam, V, wr, delta = 0.08, 0.05, 15.0, 1.02, 0.02
    acc = initial_acceleration(rig(psi, gam, V, wr, delta), formulation)
    ref, (N, kappa, alpha, Fx, Fy, Mz) = rig_reference(psi, gam, V, wr, delta)
    assert abs(kappa) > 0.01 and abs(alpha) > 0.05 and abs(Mz * math.sin(gam)) > 0.5
    # 1e-9 relative: the same numbers through the recursions and a linear solve
    np.testing.assert_allclose(acc, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def test_straight_rolling_without_slip_leaves_only_the_shifts():
    """kappa = alpha = gamma = 0: the forces are the zero-slip values of the set (its
    shifts: rolling-resistance-like SVx/SHx, ply steer and conicity SHy/SVy), and zero for
    the same tire with every shift set to 0."""
    ref, (N, kappa, alpha, Fx, Fy, Mz) = rig_reference(0.0, 0.0, 15.0, 1.0, 0.02)
    assert kappa == 0 and alpha == 0 and N == pytest.approx(4000.0)
    acc = initial_acceleration(rig(0.0, 0.0, 15.0, 1.0, 0.02), "sr-com")
    mt = MC + MW
    np.testing.assert_allclose(acc, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    # the shipped set at Fz = 4 kN (docs/magic-formula.md): Fx = -172 N, Fy = 42 N
    assert acc[0] * mt == pytest.approx(-172.0, abs=1.0)
    assert acc[1] * mt == pytest.approx(42.0, abs=1.0)
    zero = {nm: 0.0 for nm in SHIFTS}
    acc0 = initial_acceleration(rig(0.0, 0.0, 15.0, 1.0, 0.02, coefficients=zero), "sr-com")
    assert abs(acc0[0]) * mt < 1e-9 and abs(acc0[1]) * mt < 1e-9
    assert abs(acc0[3]) < 1e-9


def test_braking_a_free_wheel_pushes_against_the_motion():
    """A brake torque on the spinning wheel of the rolling rig: the wheel slows down
    relative to the road (kappa < 0) and the longitudinal force decelerates the rig."""
    m = rig(0.0, 0.0, 10.0, 1.0, (MC + MW) * 9.81 / KT, brake=300.0)
    sim = simulate(m, 0.3, 1e-3)
    cm = m.compile()
    ix, isp = cm.coordinate("x"), cm.coordinate("spin")
    vx, om = sim.zd[:, ix], sim.zd[:, isp]
    kappa = (om * R0 - vx) / vx
    late = sim.t > 0.1
    assert np.all(kappa[late] < -1e-3)
    assert np.all(sim.zdd[late, ix] < -1.0)                    # Fx / (MC + MW) < 0
    assert vx[-1] < vx[0] - 0.3
    # quasi-steady: the tire force carries the brake torque, -R Fx ~ 300 N m
    Fx = (MC + MW) * sim.zdd[-1, ix]
    assert -R0 * Fx == pytest.approx(300.0, rel=0.1)


def test_cornering_sweep_peaks_at_the_peak_slip_of_the_set():
    """Pure side slip (kappa = 0, gamma = 0) at Fz = 4 kN = FNOMIN, steer swept: the
    lateral force of the rig, from its accelerations, follows mf52's Fy0 and its largest
    magnitude is at the set's peak slip angle alpha = -0.268 rad (4140 N;
    docs/magic-formula.md), to the grid spacing."""
    V = 20.0
    alphas, fys = [], []
    for psi in np.linspace(0.20, 0.34, 15):
        # wr = cos(psi) gives V_r = V_x: kappa = 0
        acc = initial_acceleration(rig(psi, 0.0, V, math.cos(psi), 0.02), "sr-com")
        ref, (N, kappa, alpha, Fx, Fy, Mz) = rig_reference(psi, 0.0, V, math.cos(psi), 0.02)
        assert abs(kappa) < 1e-15
        mt = MC + MW
        Fy_rig = (-acc[0] * math.sin(psi) + acc[1] * math.cos(psi)) * mt
        assert Fy_rig == pytest.approx(Fy, rel=1e-9)
        alphas.append(alpha)
        fys.append(Fy_rig)
    alphas, fys = np.array(alphas), np.array(fys)
    k = int(np.argmax(np.abs(fys)))
    assert 0 < k < len(fys) - 1                                # an interior peak
    assert abs(alphas[k] - (-0.268)) <= 0.6 * np.abs(np.diff(alphas)).max()
    assert np.abs(fys).max() == pytest.approx(4140.0, rel=2e-3)


# ----------------------------------------------------------------------------------------
# design sensitivities through the law
# ----------------------------------------------------------------------------------------


def quarter_car_mf():
    """The quarter car of tests/test_tire_sensitivity.py (rolling at 3 m/s onto a 1 cm
    step descent with some slip and camber) on the Magic Formula law, with the vertical
    tire stiffness, the coil spring and two MF coefficients (PDX1, PKY1) as parameters."""
    m = Model("quarter-car-mf", gravity=(0.0, 0.0, -9.81))
    for nm, v, u in (("ms", 250.0, "kg"), ("k", 2.0e4, "N/m"), ("c", 1.5e3, "N*s/m"),
                     ("kt", 1.5e5, "N/m"), ("ct", 300.0, "N*s/m"),
                     ("mux", PM[IDX["PDX1"]], "1"), ("cky", PM[IDX["PKY1"]], "1"),
                     ("xs", 0.35, "m")):
        m.parameter(nm, v, u, provenance="test value")
    m.road(z0=0.0, steps=[{"x": "xs", "height": -0.01, "length": 0.1}])
    m.body("cx", mass=0.0)
    m.body("cy", mass=0.0)
    m.body("sprung", mass="ms", com=(0.0, 0.0, 0.0), inertia=(20.0, 30.0, 25.0),
           points={"top": (0.0, 0.0, 0.0), "front": (0.5, 0.0, 0.1)})
    m.body("hub", mass=15.0, inertia=(0.1, 0.1, 0.1), points={"low": (0.0, 0.0, 0.0)})
    m.body("knuckle", mass=2.0, inertia=(0.02, 0.02, 0.02))
    m.body("wheel", mass=12.0, inertia=(0.45, 0.8, 0.45), points={"C": (0.0, 0.0, 0.0)},
           vectors={"spin": (0.0, 1.0, 0.0)})
    m.prismatic("x", GROUND, "cx", axis=(1, 0, 0), qd0=3.0)
    m.prismatic("y", "cx", "cy", axis=(0, 1, 0), qd0=0.05)
    m.prismatic("z", "cy", "sprung", axis=(0, 0, 1), q0=0.6)
    # near the static deflections: tire 279 kg g / kt = 18 mm, coil 250 kg g / k = 0.123 m
    m.prismatic("susp", "sprung", "hub", axis=(0, 0, 1), q0=-0.305, qd0=-0.05)
    m.revolute("camber", "hub", "knuckle", axis=(1, 0, 0), q0=0.03, qd0=0.2)
    m.joint_spring("camber_stiff", "camber", k=2000.0, c=20.0)
    m.revolute("spin", "knuckle", "wheel", axis=(0, 1, 0), qd0=0.99 * 3.0 / 0.313)
    m.spring("coil", "sprung", "top", "hub", "low", k="k", c="c", length=0.305 + 0.1226)
    m.tire("tire", "wheel", "C", "spin", radius=None, k="kt", c="ct", law="magic-formula",
           tir="mf52_205_60R15", coefficients={"PDX1": "mux", "PKY1": "cky"})
    return m


PARAMS = ["kt", "k", "mux", "cky"]
OBJ = [O.point_acceleration("zdd", "sprung.front", components="z"),
       O.coordinate("vy", "y", level=1),
       O.coordinate("v", "x", level=1)]


def _rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("formulation", ["sr-com", "sr-origin", "global"])
def test_quarter_car_mf_direct_adjoint_and_differences_agree(formulation):
    # dt = 0.5 ms: the spin mode of the slipping wheel (Kx R^2 / (V I) ~ 2400 1/s) makes the
    # first Newton iterations of 1 ms steps fail; at 0.5 ms every step converges
    kw = dict(objectives=OBJ, parameters=PARAMS, t_end=0.2, dt=5e-4, formulation=formulation)
    model = quarter_car_mf()
    D = sensitivity(model, method="direct", **kw)
    x = D.simulation.coordinate("x")
    assert x[0] < 0.30 and x[-1] > 0.40                  # the contact crosses the step
    A = sensitivity(model, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(model, method="fd", fd_step=1e-4, **kw)
    # 1e-9: the same linear recursion run forward and transposed backward (measured 9e-15)
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    # per objective, relative to its largest (step-scaled) entry: central differences with
    # relative steps 1e-4 of simulations converged to the Newton tolerance (truncation
    # ~1e-8, Newton noise ~1e-7 on the speed objective; measured at most 2.5e-7 in both
    # formulations; with steps 1e-5 the noise reaches 1.5e-6)
    for k in range(len(D.objectives)):
        scale = np.max(np.abs(D.gradient[k] * np.abs(F.fd_steps)))
        np.testing.assert_allclose(D.gradient[k] * F.fd_steps, F.gradient[k] * F.fd_steps,
                                   rtol=0, atol=1e-6 * scale)
    # every parameter matters, the MF coefficients included
    assert np.all(np.abs(D.gradient * F.fd_steps).max(axis=0) > 1e-6 * np.abs(
        D.gradient * F.fd_steps).max())


def test_buggy_on_the_magic_formula_direct_adjoint_and_differences_agree():
    """The buggy step descent (tests/test_buggy.py) with its four tires on the Magic
    Formula law, PDX1 and PKY1 bound to parameters.  The shifts are set to 0: with them the
    tires push a vehicle at rest (no low-speed fade, docs/magic-formula.md) and the static
    equilibrium of the prepared maneuver does not exist."""
    doc = model_to_dict(catalog.load("buggy-step", x0=4.6))
    for nm, key in (("mux", "PDX1"), ("cky", "PKY1")):
        doc["parameters"][nm] = {"value": float(PM[IDX[key]]), "unit": "1",
                                 "provenance": f"test value: {key} of the shipped set"}
    zero = {nm: 0.0 for nm in SHIFTS}
    for t in doc["tires"]:
        del t["mu"]
        t.update(law="magic-formula", tir="mf52_205_60R15", v_eps=0.5,
                 coefficients=dict(zero, PDX1="mux", PKY1="cky"))
    model = vehicle.prepare(model_from_dict(doc))
    params = ["kf", "cf", "kr", "cr", "mc", "mux", "cky"]
    kw = dict(parameters=params, t_end=0.45)
    D = sensitivity(model, method="direct", **kw)
    A = sensitivity(model, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(model, method="fd", **kw)
    # measured 1.8e-14
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    # scaled by the parameter values, to 1e-5 of the largest entry as in tests/test_buggy.py
    # (measured 1.1e-6; the PDX1 entry is 5e-6 of the largest, at the noise level of the
    # differences: the buggy rolls with little longitudinal slip)
    cm = D.simulation.compiled
    rho = np.array([cm.param_values[cm.param_names.index(p)] for p in params])
    np.testing.assert_allclose(F.gradient * rho, D.gradient * rho, rtol=0,
                               atol=1e-5 * np.max(np.abs(D.gradient * rho)))
    assert abs(D.gradient[0, -1] * rho[-1]) > 1e-5 * np.max(np.abs(D.gradient * rho))


# ----------------------------------------------------------------------------------------
# builder, file format, errors
# ----------------------------------------------------------------------------------------


def test_coefficients_are_fields_bound_to_parameters():
    m = rig()
    cm = m.compile({"mux": 1.5})
    o = cm.arrays.ty_par[0] + TL.TP_MF
    assert cm.arrays.ty_law[0] == TL.LAW_MF
    p = cm.arrays.p
    assert p[o + IDX["PDX1"]] == 1.5 and cm.G[o + IDX["PDX1"], cm.param_names.index("mux")] == 1
    assert p[o + IDX["PCX1"]] == PM[IDX["PCX1"]]                 # from the .tir
    assert p[cm.arrays.ty_par[0] + T.TP_VEPS] == DEFAULT_V_EPS   # the MF default
    # radius=None takes UNLOADED_RADIUS
    cq = quarter_car_mf().compile()
    assert cq.arrays.p[cq.arrays.ty_par[0] + T.TP_R] == R0


def test_round_trip_through_the_file_format():
    model = rig(coefficients={"LMUY": 0.9})
    doc = model_to_dict(model)
    t = doc["tires"][0]
    assert t["law"] == "magic-formula" and t["tir"] == "mf52_205_60R15"
    assert t["coefficients"]["PDX1"] == "mux" and t["coefficients"]["LMUY"] == 0.9
    again = model_from_dict(doc)
    a, b = model.compile(), again.compile()
    for x, y in zip(a.arrays, b.arrays):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # a disc tire writes no law keys
    assert "law" not in model_to_dict(rig(law="disc"))["tires"][0]


def test_a_tir_path_relative_to_the_model_file(tmp_path):
    (tmp_path / "my.tir").write_text(EXAMPLE_TIR.read_text())
    doc = model_to_dict(rig())
    doc["tires"][0]["tir"] = "my.tir"
    doc["tires"][0]["coefficients"] = {"PDX1": {"param": "mux", "scale": 1.0}}
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(doc))
    cm = load_model(path).compile()
    o = cm.arrays.ty_par[0] + TL.TP_MF
    np.testing.assert_array_equal(cm.arrays.p[o:o + len(COEFFICIENT_NAMES)],
                                  rig().compile().arrays.p[o:o + len(COEFFICIENT_NAMES)])


def test_the_model_file_example_of_the_docs_loads():
    """The ``[[tires]]`` example of docs/model-files.md, on the rig's wheel."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "model-files.md").read_text()
    block = re.search(r"```toml\n(\[\[tires\]\]\n.*?)```", text, re.S).group(1)
    table = tomllib.loads(block.replace("wheel_fl", "wheel"))["tires"][0]
    doc = model_to_dict(rig())
    doc["tires"] = [table]
    cm = model_from_dict(doc).compile()
    o = cm.arrays.ty_par[0]
    assert cm.arrays.ty_law[0] == TL.LAW_MF and cm.arrays.p[o + T.TP_VEPS] == 0.5
    assert cm.arrays.p[o + TL.TP_MF + IDX["LMUY"]] == 0.9
    assert cm.G[o + TL.TP_MF + IDX["PKY1"], cm.param_names.index("cky")] == 1


def test_errors_name_the_element():
    m = rig(law="disc")
    kw = dict(radius=0.3, k=1e5)
    with pytest.raises(ModelError, match="tire 'bad': unknown law 'pacejka'"):
        m.tire("bad", "wheel", "C", "spin", law="pacejka", **kw)
    with pytest.raises(UnknownNameError, match="tire 'bad'.*PDX9"):
        m.tire("bad", "wheel", "C", "spin", law="magic-formula", tir="mf52_205_60R15",
               coefficients={"PDX9": 1.0}, **kw)
    with pytest.raises(ModelError, match="tire 'bad'.*nowhere.tir.*mf52_205_60R15"):
        m.tire("bad", "wheel", "C", "spin", law="magic-formula", tir="nowhere.tir", **kw)
    with pytest.raises(ModelError, match="tire 'bad': tir and coefficients need"):
        m.tire("bad", "wheel", "C", "spin", coefficients={"PDX1": 1.0}, **kw)
    with pytest.raises(UnknownNameError, match="nope"):
        m.tire("bad", "wheel", "C", "spin", law="magic-formula", tir="mf52_205_60R15",
               coefficients={"PDX1": "nope"}, **kw)
        m.compile()
    m2 = rig(coefficients={"FNOMIN": -4000.0})
    with pytest.raises(ModelError, match="tire 'tire': Magic Formula coefficient FNOMIN must "
                                         "be positive"):
        m2.compile()
