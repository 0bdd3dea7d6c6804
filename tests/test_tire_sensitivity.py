"""Exact sensitivities through the tire-ground contact (the tangent of the contact wrench in
:func:`workbench.kernels.tangents.tire_forces_t`): step Jacobians of a wheel on a floating joint
against central differences of the same residual, and direct = adjoint = central
differences on a quarter car that rolls over the smoothed road step, with tire and road
fields among the parameters."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import Model
from workbench import objectives as O
from workbench.formulations.semirecursive import matrixr as MR
from workbench.formulations.semirecursive import step_jacobians as S
from workbench.integrators.simulation import simulate
from workbench.kernels import tree as K
from workbench.model.elements import GROUND
from workbench.sensitivities.driver import sensitivity


def quarter_car(camber=True):
    """Quarter car rolling at 3 m/s onto a 1 cm step descent (centre 0.35 m ahead of the
    contact point, smoothed over 0.1 m): sprung mass on x/y/z slides, unsprung hub on a
    vertical slide with a spring-damper, a cambering knuckle (joint spring) and a spinning
    wheel; the wheel starts with some longitudinal and lateral slip so that every term of
    the contact law is active.  All values are test values."""
    m = Model("quarter-car", gravity=(0.0, 0.0, -9.81))
    for nm, v, u in (("ms", 250.0, "kg"), ("k", 2.0e4, "N/m"), ("c", 1.5e3, "N*s/m"),
                     ("R", 0.3, "m"), ("kt", 1.5e5, "N/m"), ("ct", 300.0, "N*s/m"),
                     ("mu", 0.9, "1"), ("veps", 0.3, "m/s"), ("xs", 0.35, "m"),
                     ("Ls", 0.1, "m")):
        m.parameter(nm, v, u, provenance="test value")
    m.road(z0=0.0, steps=[{"x": "xs", "height": -0.01, "length": "Ls"}])
    m.body("cx", mass=0.0)
    m.body("cy", mass=0.0)
    m.body("sprung", mass="ms", com=(0.0, 0.0, 0.0), inertia=(20.0, 30.0, 25.0),
           points={"top": (0.0, 0.0, 0.0), "front": (0.5, 0.0, 0.1)})
    m.body("hub", mass=15.0, inertia=(0.1, 0.1, 0.1), points={"low": (0.0, 0.0, 0.0)})
    m.body("knuckle", mass=2.0, inertia=(0.02, 0.02, 0.02))
    m.body("wheel", mass=12.0, inertia=(0.32, 0.55, 0.32), points={"C": (0.0, 0.0, 0.0)},
           vectors={"spin": (0.0, 1.0, 0.0)})
    m.prismatic("x", GROUND, "cx", axis=(1, 0, 0), qd0=3.0)
    m.prismatic("y", "cx", "cy", axis=(0, 1, 0), qd0=0.15)
    m.prismatic("z", "cy", "sprung", axis=(0, 0, 1), q0=0.6)
    # near the static deflections: tire 279 kg g / kt = 18 mm, coil 250 kg g / k = 0.123 m
    m.prismatic("susp", "sprung", "hub", axis=(0, 0, 1), q0=-0.318, qd0=-0.05)
    m.revolute("camber", "hub", "knuckle", axis=(1, 0, 0), q0=0.03 if camber else 0.0,
               qd0=0.2 if camber else 0.0)
    m.joint_spring("camber_stiff", "camber", k=2000.0, c=20.0)
    m.revolute("spin", "knuckle", "wheel", axis=(0, 1, 0), qd0=0.97 * 3.0 / 0.3)
    m.spring("coil", "sprung", "top", "hub", "low", k="k", c="c", length=0.318 + 0.1226)
    m.tire("tire", "wheel", "C", "spin", radius="R", k="kt", c="ct", mu="mu", v_eps="veps")
    return m


PARAMS = ["ms", "k", "c", "R", "kt", "ct", "mu", "veps", "xs", "Ls"]
OBJ = [O.point_acceleration("zdd", "sprung.front", components="z"),
       O.angular_velocity("w", "knuckle", components="x", frame="body"),
       O.coordinate("v", "x", level=1)]


def _rel_err(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def test_step_jacobians_with_tire_match_differences_of_the_residual():
    cm = quarter_car().compile()
    ma = cm.arrays
    cols = [cm.param_names.index(nm) for nm in PARAMS]
    Gm = np.ascontiguousarray(cm.G[:, cols])
    co = O.compile_objectives(cm, OBJ)
    sim = simulate(cm, 0.11, 1e-3)
    # a state on the step ramp, in contact, with slip
    k = int(np.argmin(np.abs(sim.t - 0.11)))
    t, zi, zdi, a, z = sim.t[k], sim.zi[k], sim.zdi[k], sim.zddi[k], sim.z[k]
    d, nm_, npar = cm.d, co.n_measures, len(PARAMS)
    Jr, Mb = np.zeros((d, 2 * d + npar)), np.zeros((d, d))
    Jm, mv = np.zeros((nm_, 3 * d + npar)), np.zeros(nm_)
    for form in (MR.FORM_COM, MR.FORM_ORIGIN):
        zero_i = np.zeros(npar, dtype=np.int64)          # every tangent computed forward
        st = S.step_jacobians(ma, ma.p, form, t, zi, zdi, a, z.copy(), Gm, zero_i + 1, zero_i,
                              co.ms_type, co.ms_a, co.ms_c, Jr, Mb, Jm, mv,
                              np.zeros((cm.n, d)), np.zeros(cm.n), np.zeros(cm.n))
        assert st == MR.OK

        def F(zi_, zdi_, a_, p_):
            st, err, bad, zz, zd, zddb, R, Md, tau, Mbar, Qb = MR.evaluate_state(
                ma, p_, form, t, zi_, zdi_, z.copy(), 1e-14, 50)
            assert st == MR.OK
            return Mbar @ a_ - Qb

        # the state is where it should be: contact on the ramp of the step
        x_contact = z[cm.coordinate("x")]
        assert 0.3 < x_contact < 0.4
        eps = 1e-6
        JrF = np.zeros_like(Jr)
        for c in range(2 * d + npar):
            out = []
            for s in (eps, -eps):
                zi_, zdi_, p_ = zi.copy(), zdi.copy(), ma.p.copy()
                if c < d:
                    zi_[c] += s * max(1.0, abs(zi[c]))
                elif c < 2 * d:
                    zdi_[c - d] += s * max(1.0, abs(zdi[c - d]))
                else:
                    j = c - 2 * d
                    p_ = p_ + s * abs(cm.param_values[cols[j]]) * Gm[:, j]
                out.append(F(zi_, zdi_, a, p_))
            scale = (max(1.0, abs(zi[c])) if c < d else max(1.0, abs(zdi[c - d])) if c < 2 * d
                     else abs(cm.param_values[cols[c - 2 * d]]))
            JrF[:, c] = (out[0] - out[1]) / (2 * eps * scale)
        # columns relative to their own size (parameters span 1e-1 .. 1e5 in SI units);
        # 1e-6: central differences with relative steps 1e-6 of a residual solved to
        # 1e-14 (truncation ~1e-12, rounding ~1e-8 relative); floor 1e-10 of the largest
        # column for columns that vanish analytically (rounding u |r| / eps ~ 1e-9 N)
        for c in range(2 * d + npar):
            ref = np.max(np.abs(JrF[:, c])) + 1e-4 * np.max(np.abs(JrF))
            assert np.max(np.abs(Jr[:, c] - JrF[:, c])) < 1e-6 * ref, (form, c)


def test_quarter_car_over_the_step_direct_adjoint_and_differences_agree():
    kw = dict(objectives=OBJ, parameters=PARAMS, t_end=0.2, dt=1e-3)
    model = quarter_car()
    D = sensitivity(model, method="direct", **kw)
    # the run crosses the whole step ramp (contact x from 0.3 to 0.9 m)
    x = D.simulation.coordinate("x")
    assert x[0] < 0.30 and x[-1] > 0.40
    A = sensitivity(model, method="adjoint", simulation=D.simulation, **kw)
    F = sensitivity(model, method="fd", **kw)
    # 1e-9: the same linear recursion run forward and transposed backward
    assert _rel_err(A.gradient, D.gradient) < 1e-9
    # per objective and parameter: 1e-5 relative to the largest entry of the objective:
    # central differences with relative step 1e-5 of simulations converged to 1e-13
    for k in range(len(D.objectives)):
        scale = np.max(np.abs(D.gradient[k] * np.abs(F.fd_steps)))
        np.testing.assert_allclose(D.gradient[k] * F.fd_steps, F.gradient[k] * F.fd_steps,
                                   rtol=0, atol=1e-5 * scale)
