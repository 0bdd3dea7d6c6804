"""Bricard's over-constrained mechanism (the geometry of the IFToMM MBS benchmark problem
A04, rebuilt from its public description: five 1 kg, 1 m rods of 0.1 m square section
along the edges of a unit cube, six revolute joints each perpendicular to both rods it
joins, gravity -y, start from rest).

Grubler's count gives 0 degrees of freedom (5 relative coordinates, 5 closure rows of
the revolute cut joint) but the closure rows have rank 4: the model exercises the
least-squares (redundant-constraint) path of the Matrix-R projection (seed 001 eqs
16-17) in the simulation and in both sensitivity methods.
"""

import math

import numpy as np
import pytest

from workbench.errors import SingularConfigurationError
from workbench.integrators.simulation import simulate
from workbench.model.builder import Model
from workbench.model.elements import GROUND
from workbench.objectives import coordinate, point_position
from workbench.sensitivities.driver import sensitivity

SECTION = 0.1


def bricard(dof=None) -> Model:
    """The A04 geometry; the rods' frames are parallel to the global axes at q = 0."""
    m = Model("bricard", gravity=(0.0, -9.81, 0.0))
    m3 = m.parameter("m3", 1.0, "kg", "A04: rod mass")
    zc = m.parameter("zc", 1.0, "m", "A04: height of the last ground pivot")
    xg3 = m.parameter("xg3", 0.5, "m", "A04: uniform rod, centre of mass at mid-length")
    across = (1.0 + SECTION ** 2) / 12.0            # about a transverse axis (m = L = 1)
    along = 2.0 * SECTION ** 2 / 12.0               # about the rod's own axis
    rods = [(1, 0, 0), (0, -1, 0), (0, 0, 1), (-1, 0, 0), (0, 1, 0)]
    axes = [(0, 1, 0), (0, 0, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    parent = GROUND
    for i, (rod, axis) in enumerate(zip(rods, axes)):
        k = int(np.argmax(np.abs(rod)))
        inertia = [across] * 3
        inertia[k] = along
        com = [0.5 * c for c in rod]
        if i == 2:
            com[k] = xg3
        name = f"rod{i + 1}"
        m.body(name, m3 if i == 2 else 1.0, com=tuple(com), inertia=tuple(inertia),
               points={"tip": rod})
        m.revolute(f"j{i + 1}", parent, name, parent_point=(0, 0, 0) if i == 0 else "tip",
                   axis=axis)
        parent = name
    m.cut("j6", "revolute", "rod5", GROUND, point1="tip", point2=(0, 0, zc),
          axis1=(1, 0, 0))
    if dof is not None:
        m.dof(dof)
    return m


def test_bricard_moves_with_one_dof_and_keeps_its_threefold_symmetry():
    cm = bricard("j1").compile()
    assert (cm.n, cm.d) == (5, 1)          # Grubler: 0; the closure rows have rank 4
    res = simulate(cm, 10.0, 1e-3)
    assert res.max_constraint_violation < 1e-10   # position tolerance 1e-12 + rounding
    z = res.z
    # the trihedral linkage's configuration curve keeps the odd joints equal and the
    # even joints equal (a kinematic property the equations do not impose one by one);
    # 1e-9: position tolerance amplified by the redundant least-squares solve
    assert np.max(np.abs(z[:, 0] - z[:, 2])) < 1e-9
    assert np.max(np.abs(z[:, 0] - z[:, 4])) < 1e-9
    assert np.max(np.abs(z[:, 1] - z[:, 3])) < 1e-9
    # conservative: it swings from rest at q1 = 0 to rest at the mirror position q1 = pi
    # with the same potential energy (1e-5 rad: output sampling of a turning point at
    # dt = 1e-3 plus the trapezoidal rule's O(h^2) energy error)
    assert abs(np.max(z[:, 0]) - math.pi) < 1e-5
    # the trapezoidal rule's bounded O(h^2) energy oscillation: E = -29.43 J, h = 1e-3
    assert np.max(np.abs(res.energy - res.energy[0])) < 1e-4


def test_bricard_even_joint_as_dof_stops_with_a_typed_error_that_names_a_better_choice():
    """An even joint turns back at t ~ 1.25 s while the mechanism keeps moving.  A user's
    own choice is not overridden: the error names the odd joints as the coordinates that
    determine the configuration there, and they do."""
    with pytest.raises(SingularConfigurationError) as exc:
        simulate(bricard("j2").compile(), 3.0, 1e-3)
    err = exc.value
    assert 1.0 < err.time < 1.5 and "'bricard'" in str(err)
    assert err.suggested_dof and set(err.suggested_dof) <= {"j1", "j3", "j5"}
    assert str(err.suggested_dof) in str(err)
    res = simulate(bricard(err.suggested_dof[0]).compile(), 3.0, 1e-3)
    assert res.max_constraint_violation < 1e-10   # position tolerance 1e-12 + rounding


def test_bricard_automatic_dof_choice_is_revised_and_the_run_completes():
    """The automatic choice (best conditioned at the start) is an even joint; the run is
    repeated from the same initial state with the coordinates that determine the
    configuration where it stopped, and equals a run with that choice declared."""
    cm = bricard().compile()
    assert cm.dof_names[0] in ("j2", "j4")
    res = simulate(cm, 10.0, 1e-3)
    assert len(res.dof_revisions) == 1
    rev = res.dof_revisions[0]
    assert rev["from"] == list(cm.dof_names) and 1.0 < rev["time"] < 1.5
    assert list(res.dof_names) == rev["to"] and set(rev["to"]) <= {"j1", "j3", "j5"}
    ref = simulate(bricard(rev["to"][0]).compile(), 10.0, 1e-3)
    # same initial state, same independent coordinate: the same arithmetic
    assert np.max(np.abs(res.z - ref.z)) < 1e-12
    assert res.max_constraint_violation < 1e-10   # position tolerance 1e-12 + rounding


def test_bricard_sensitivities_after_a_revised_dof_choice():
    """Mass and centre-of-mass parameters do not move the initial assembly: the sweeps
    run on the revised coordinates and agree with differences of the same simulation
    (which revises its choice the same way); a parameter that moves the assembly gets a
    typed error asking for an explicit choice."""
    objectives = [point_position("p3", "rod3.tip", components="xy")]
    kw = dict(objectives=objectives, parameters=["m3", "xg3"], t_end=2.0, dt=1e-3)
    g_dir = sensitivity(bricard().compile(), method="direct", **kw).gradient
    g_adj = sensitivity(bricard().compile(), method="adjoint", **kw).gradient
    g_fd = sensitivity(bricard().compile(), method="fd", **kw).gradient
    np.testing.assert_allclose(g_adj, g_dir, rtol=1e-9)   # exact transposes: rounding
    np.testing.assert_allclose(g_fd, g_dir, rtol=1e-6)    # central differences, O(delta^2)
    with pytest.raises(SingularConfigurationError) as exc:
        sensitivity(bricard().compile(), objectives, ["zc"], method="adjoint", t_end=2.0,
                    dt=1e-3)
    assert "Model.dof(" in str(exc.value) and exc.value.suggested_dof


def test_bricard_gradients_direct_equal_adjoint_equal_differences():
    """Redundant closure rows in the sensitivities: a mass (reverse-mode product in the
    adjoint) and a centre-of-mass coordinate."""
    cm = bricard("j1").compile()
    objectives = [point_position("p3", "rod3.tip", components="xy"),
                  coordinate("rate4", "j4", level=1)]
    kw = dict(objectives=objectives, parameters=["m3", "xg3"], t_end=1.0, dt=1e-3)
    g_dir = sensitivity(cm, method="direct", **kw).gradient
    g_adj = sensitivity(cm, method="adjoint", **kw).gradient
    g_fd = sensitivity(cm, method="fd", **kw).gradient
    assert np.all(np.abs(g_dir) > 1e-4)            # every entry is a real sensitivity
    # exact transposes of each other: rounding only
    np.testing.assert_allclose(g_adj, g_dir, rtol=1e-9)
    # central differences of the same discrete simulation: truncation O(delta^2)
    np.testing.assert_allclose(g_fd, g_dir, rtol=1e-6)


def test_shipped_bricard_file_is_the_builder_model():
    """The model file (TOML, per-value provenance) and the builder above describe the
    same mechanism: the same motion to rounding."""
    from workbench.model import catalog
    info = catalog.describe("bricard")
    assert info["reconstruction"]
    # Newton converged to 1e-13 (not the default 1e-10): the two models' inputs differ by
    # rounding, which can change a step's Newton iteration count and so move its
    # accelerations anywhere within the Newton tolerance (2.7e-12 rad at the default)
    a = simulate("bricard", 2.0, 1e-3, newton_tol=1e-13)
    b = simulate(bricard("j1").compile(), 2.0, 1e-3, newton_tol=1e-13)
    assert a.dof_names == ("j1",) and not a.dof_revisions
    assert np.max(np.abs(a.z - b.z)) < 1e-12      # the same arithmetic up to rounding
