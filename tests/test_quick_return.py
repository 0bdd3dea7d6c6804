"""The quick-return mechanism of seed 000 (section 5, Fig. 8; reconstruction: the seed gives
its topology only).

Independent references: the seed's topology (5 coordinates, 2 + 2 closure equations,
1 degree of freedom), closed-form planar geometry of the mechanism (rocker angle and slide
from the crank angle, the ram on its guide), the classical quick-return ratio of a
slotted-lever mechanism (the rocker's extremes are where it is tangent to the crank
circle: crank angles 2 acos(rc/dOD) and 2 pi - 2 acos(rc/dOD) between them), and the
agreement of the three formulations.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb

T_END, DT = 2.0, 1e-3


@pytest.fixture(scope="module")
def runs():
    cm = wb.catalog.load("quick-return").compile()
    return cm, {f: wb.simulate(cm, T_END, DT, f) for f in ("sr-com", "sr-origin", "global")}


def _p(cm, name):
    return float(cm.param_values[cm.param_names.index(name)])


def test_topology_is_the_seeds():
    cm = wb.catalog.load("quick-return").compile()
    assert (cm.n, cm.m, cm.d) == (5, 4, 1)
    assert list(cm.dof_names) == ["j3"]


def test_every_formulation_gives_the_same_motion(runs):
    _, r = runs
    # the two reference points solve the same discrete equations: rounding only
    np.testing.assert_allclose(r["sr-origin"].z, r["sr-com"].z, rtol=0, atol=1e-10)
    # the global formulation's Newton iterations stop at 1e-10: 1e-7 on the coordinates
    np.testing.assert_allclose(r["global"].z, r["sr-com"].z, rtol=0, atol=1e-7)
    for res in r.values():
        assert res.max_constraint_violation < 1e-10
        # conservative: no secular drift beyond 1e-4 J (the rule's bounded O(h^2) ripple
        # is about 4e-3 J here, of a kinetic energy of several J)
        assert abs(res.energy_drift) < 1e-4


def test_closure_matches_the_closed_form_geometry(runs):
    cm, r = runs
    res = r["sr-com"]
    dOD, rc, Lr, Ll, yE = (_p(cm, k) for k in ("dOD", "rc", "Lr", "Ll", "yE"))
    th1, h2, r3 = res.coordinate("j1"), res.coordinate("j2"), res.coordinate("j3")
    alpha = th1 + r3                                   # crank direction B -> D
    B = np.c_[-rc * np.cos(alpha), dOD - rc * np.sin(alpha)]
    np.testing.assert_allclose(np.arctan2(B[:, 1], B[:, 0]), th1, atol=1e-11)
    np.testing.assert_allclose(np.hypot(B[:, 0], B[:, 1]), h2, atol=1e-11)
    C = Lr * np.c_[np.cos(th1), np.sin(th1)]
    xP = C[:, 0] + np.sqrt(Ll ** 2 - (yE - C[:, 1]) ** 2)
    P = res.point_position("ram.P")
    np.testing.assert_allclose(P[:, 0], xP, atol=1e-11)
    np.testing.assert_allclose(P[:, 1], yE, atol=1e-11)


def test_quick_return_ratio_is_the_classical_one(runs):
    cm, r = runs
    res = r["sr-com"]
    ratio = _p(cm, "rc") / _p(cm, "dOD")
    th1 = res.coordinate("j1")
    alpha = th1 + res.coordinate("j3")                 # crank's absolute angle
    w = np.diff(th1)
    turns = np.nonzero(w[:-1] * w[1:] < 0)[0] + 1      # rocker extremes (sample index)
    # the crank angle at each extreme, refined by the parabola through three samples
    at = []
    for k in turns:
        y0, y1, y2 = th1[k - 1], th1[k], th1[k + 1]
        s = 0.5 * (y0 - y2) / (y0 - 2 * y1 + y2)
        at.append(np.interp(k + s, np.arange(len(alpha)), alpha))
    spans = np.diff(at)
    assert len(spans) >= 4
    short, long_ = 2 * np.arccos(ratio), 2 * np.pi - 2 * np.arccos(ratio)
    expected = [short if abs(s - short) < abs(s - long_) else long_ for s in spans]
    assert set(np.round(expected, 6)) == {round(short, 6), round(long_, 6)}
    # 2e-3 rad: the parabola through samples 1 ms apart (about 0.012 rad of crank angle)
    np.testing.assert_allclose(spans, expected, atol=2e-3)


def test_gradients_are_exact_on_the_quick_return():
    cm = wb.catalog.load("quick-return").compile()
    kw = dict(t_end=0.3, dt=DT, parameters=["rc", "Lr", "Ll", "m5", "I3"])
    d = wb.sensitivity(cm, method="direct", **kw)
    a = wb.sensitivity(cm, method="adjoint", **kw)
    f = wb.sensitivity(cm, method="fd", **kw)
    # direct and adjoint: the same discrete derivative, two orders of evaluation
    np.testing.assert_allclose(a.gradient, d.gradient, rtol=1e-9, atol=1e-12)
    # central differences of the simulation (Newton stops at 1e-10): 1e-5 relative
    np.testing.assert_allclose(d.gradient, f.gradient, rtol=1e-5,
                               atol=1e-6 * np.abs(f.gradient).max())
