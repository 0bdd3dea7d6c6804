"""Joint reaction forces as objective measures (issue 28 item 6): the closure multipliers
of the cut joints (seed 000 eq 61) recovered from the projected Matrix-R equations, with
exact gradients.

Independent references: the hand computation of a pinned rod's pivot force (released at
rest: m g / 4; along the motion Newton's law for the rod), the linearity of that force in
the rod's mass (the motion of a pinned rod does not depend on its mass, so the force is
proportional to it and d psi / d m = power psi / m), central differences of the whole
simulation for every design parameter of the quick-return mechanism (geometric ones
included), and the direct method against the adjoint one.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pinned_rod

import workbench as wb
from workbench.errors import ModelError, OptionError, UnknownNameError
from workbench.objectives import from_table, reaction, resolve_objectives
from workbench.sensitivities import measure_values

G = 9.81



@pytest.mark.parametrize("formulation", ["sr-com", "sr-origin", "global", "multipliers"])
def test_reaction_measure_is_the_hand_computed_pivot_force(formulation):
    """At release the pivot carries m g / 4 upwards (angular acceleration 3 g / (2 L));
    along the motion the force on the rod is m a_G - m g (Newton's law).  The measure is
    the force on body2 (ground), minus the force on the rod."""
    m, L = 2.0, 0.8
    cm = pinned_rod(m, L).compile()
    sim = wb.simulate(cm, 0.3, 1e-3, formulation)
    co = resolve_objectives(cm, [reaction("R", "pin", "xy")])
    MV = measure_values(sim, co)
    np.testing.assert_allclose(MV[0], [0.0, -m * G / 4], atol=1e-9)
    th, w, al = sim.zi[:, 0], sim.zdi[:, 0], sim.zddi[:, 0]
    aG = (L / 2) * np.c_[-(al * np.sin(th) + w ** 2 * np.cos(th)),
                         al * np.cos(th) - w ** 2 * np.sin(th)]
    on_rod = m * aG - m * np.array([0.0, -G])
    # recovered from each row's own state: rounding (1e-9 N of ~5 N); the multiplier
    # formulation integrates them: Newton's tolerance and the Baumgarte-corrected drift
    tol = 1e-6 if formulation == "multipliers" else 1e-9
    np.testing.assert_allclose(-MV, on_rod, atol=tol)


@pytest.mark.parametrize("power", [1, 2])
def test_reaction_gradient_in_the_rod_mass_is_the_linear_scaling(power):
    """Scaling a pinned rod's mass and inertia together leaves its motion unchanged and
    scales its pivot force: psi(s m, s I) = s^power psi(m, I), so along the direction
    (m, I) the gradient gives m dpsi/dm + I dpsi/dI = power psi (Euler's theorem for
    homogeneous functions), to rounding (1e-10 relative: the sweeps' accumulation over
    400 steps)."""
    m, L = 2.0, 0.8
    obj = [reaction("R", "pin", "xy", power=power)]
    kw = dict(t_end=0.4, dt=1e-3, parameters=["m", "I"])
    mod = pinned_rod(m, L)
    inertia = m * L * L / 12
    mod.parameter("I", inertia, "kg*m^2")
    mod.bodies["rod"].inertia[2] = {"param": "I"}
    cm = mod.compile()
    d = wb.sensitivity(cm, obj, method="direct", **kw)
    a = wb.sensitivity(cm, obj, method="adjoint", **kw)
    euler = m * d.gradient[:, 0] + inertia * d.gradient[:, 1]
    np.testing.assert_allclose(euler, power * d.psi, rtol=1e-10)
    np.testing.assert_allclose(a.gradient, d.gradient, rtol=1e-12)


@pytest.mark.parametrize("formulation", ["sr-com", "sr-origin"])
def test_reaction_gradients_equal_central_differences_on_the_quick_return(formulation):
    """Both cuts of the quick-return mechanism: the in-plane force of the cut revolute D
    and the two multipliers of the cut prismatic E (its transverse force and its moment),
    with respect to every design parameter (three lengths that move the geometry, a mass,
    an inertia).  Direct = adjoint to rounding (1e-12 relative: the same step Jacobians
    run forward and backward); central differences of the whole simulation (relative step
    1e-6, truncation ~1e-10 measured) to 1e-7 relative."""
    cm = wb.catalog.load("quick-return").compile()
    obj = [reaction("RD", "D", "xy"), reaction("RE", "E", "01", power=1)]
    kw = dict(t_end=0.5, dt=1e-3, formulation=formulation)
    d = wb.sensitivity(cm, obj, method="direct", **kw)
    a = wb.sensitivity(cm, obj, method="adjoint", **kw)
    f = wb.sensitivity(cm, obj, method="fd", **kw)
    scale = np.abs(d.gradient).max(axis=1, keepdims=True)
    assert np.all(np.abs(a.gradient - d.gradient) <= 1e-12 * scale)
    assert np.all(np.abs(f.gradient - d.gradient) <= 1e-7 * scale)
    np.testing.assert_allclose(a.psi, d.psi, rtol=1e-13)


def test_global_formulation_gives_the_values_but_refuses_the_gradient_by_name():
    cm = wb.catalog.load("quick-return").compile()
    co = resolve_objectives(cm, [reaction("RD", "D", "xy")])
    a = measure_values(wb.simulate(cm, 0.2, 1e-3, "sr-com"), co)
    b = measure_values(wb.simulate(cm, 0.2, 1e-3, "global"), co)
    # the two runs agree to 1e-7 in the coordinates (Newton tolerances): forces of
    # ~100 N to 1e-4 of their peak
    np.testing.assert_allclose(b, a, atol=1e-4 * np.abs(a).max())
    with pytest.raises(OptionError, match="reaction measures"):
        wb.sensitivity(cm, [reaction("RD", "D", "xy")], t_end=0.1, dt=1e-3,
                       formulation="global")


def test_reaction_objectives_from_a_model_file_table():
    obj = from_table("loads", {"kind": "reaction", "joint": "D", "components": "xy"})
    assert [(t.kind, t.target, t.component) for t in obj.terms] == [
        ("reaction", "D", "x"), ("reaction", "D", "y")]
    cm = wb.catalog.load("quick-return").compile()
    co = resolve_objectives(cm, obj)
    names = list(cm.constraint_names)
    assert [names[k] for k in co.ms_a] == ["D", "D"]


def test_bad_reaction_objectives_name_what_is_wrong():
    cm = wb.catalog.load("quick-return").compile()
    with pytest.raises(UnknownNameError, match="nosuch"):
        resolve_objectives(cm, [reaction("R", "nosuch", "x")])
    with pytest.raises(ModelError, match="in-plane"):
        resolve_objectives(cm, [reaction("R", "D", "z")])      # planar: no z equation
    with pytest.raises(ModelError, match="out of range"):
        resolve_objectives(cm, [reaction("R", "E", "7")])
    with pytest.raises(ModelError, match="component"):
        reaction("R", "D", ["w"])


def test_redundant_closures_have_no_reaction_gradient():
    """The Bricard linkage's cut revolute closes a loop that is mobile only because its
    five equations are dependent (rank 4): the multipliers are then not unique, so the
    gradient of a reaction objective is refused by name (the values are the minimum-norm
    multipliers)."""
    cm = wb.catalog.load("bricard").compile()
    with pytest.raises(OptionError, match="rank 4"):
        wb.sensitivity(cm, [reaction("R", "j6", "0")], parameters=["m"], t_end=0.1,
                       dt=1e-3)
