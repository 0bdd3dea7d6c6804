"""Vehicle templates (workbench/model/vehicle.py, docs/vehicle-templates.md).

Independent references: the hand-written vehicle files buggy-step.toml and coach.toml (the
template files buggy-template.toml and coach-template.toml describe the same vehicles, so
they must expand into the same named elements and simulate the same trajectory, and the
buggy gives the same gradients); the static-equilibrium residual re-evaluated outside the
solver; mirror symmetry (a symmetric vehicle running straight stays on its centre line).
"""

from __future__ import annotations

import copy
import tomllib

import numpy as np
import pytest

import workbench as wb
from workbench.apps import vehicle as vehicle_app
from workbench.errors import ModelError
from workbench.formulations.semirecursive.state import state_terms
from workbench.model import catalog
from workbench.model.vehicle import SUSPENSIONS, build_vehicle, expand_vehicle
from workbench.sensitivities.driver import sensitivity
from workbench.statics import at_equilibrium, total_weight

BUGGY_PARAMS = ["kf", "cf", "kr", "cr", "mc"]
#: the acceptance tolerance of issue 24 ("the same trajectory and gradients ... to
#: 1e-10"); the templates expand into the same elements in the same order, so the
#: measured differences are exactly zero
TOL = 1e-10


def _doc(name: str) -> dict:
    return tomllib.loads(catalog.path(name).read_text(encoding="utf-8"))


def _names(m) -> dict:
    return {k: list(getattr(m, k)) for k in ("bodies", "joints", "cuts", "distances",
                                             "drives", "springs", "joint_springs", "tires",
                                             "speed_controls", "loads")}


# ----------------------------------------------------------------------------------------
# the buggy and the coach, re-expressed with templates
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ref,tpl", [("buggy-step", "buggy-template"),
                                     ("coach", "coach-template")])
def test_template_files_expand_into_the_hand_written_models(ref, tpl):
    a, b = catalog.load(ref), catalog.load(tpl)
    assert _names(a) == _names(b)
    # the parameter tables are the hand-written file's (values, units, provenance)
    assert {k: (p.value, p.unit, p.provenance, p.lower, p.upper)
            for k, p in a.parameters.items()} == \
        {k: (p.value, p.unit, p.provenance, p.lower, p.upper)
         for k, p in b.parameters.items()}
    ca, cb = a.compile(), b.compile()
    assert list(ca.dof_names) == list(cb.dof_names)
    assert ca.n == cb.n and ca.m == cb.m and ca.d == cb.d
    # the same mass properties, body by body
    for name in a.bodies:
        ba, bb = a.bodies[name], b.bodies[name]
        assert (ba.mass, ba.com, ba.inertia) == (bb.mass, bb.com, bb.inertia), name


def test_buggy_template_description_is_compact():
    """The [vehicle] section of buggy-template.toml (issue 24: <= 60 lines of template
    description besides the parameter tables)."""
    lines = catalog.path("buggy-template").read_text(encoding="utf-8").splitlines()
    start = lines.index("[vehicle]")
    body = [ln for ln in lines[start:] if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(body) <= 60


@pytest.mark.parametrize("ref,tpl,t_end,dt", [("buggy-step", "buggy-template", 1.0, 1e-3),
                                              ("coach", "coach-template", 2.0, 1e-2)])
def test_template_vehicle_simulates_the_same_trajectory(ref, tpl, t_end, dt):
    A = wb.simulate(catalog.load(ref), t_end, dt)
    B = wb.simulate(catalog.load(tpl), t_end, dt)
    assert A.coord_names == B.coord_names
    assert np.max(np.abs(A.z - B.z)) <= TOL
    assert np.max(np.abs(A.zd - B.zd)) <= TOL
    assert np.ptp(A.coordinate(A.coord_names[0])) > 0.5 * dt * 10     # it moved


def test_coach_template_with_the_generated_dof_order():
    """Without ``[model] dof`` the expansion declares chassis, suspension, then spin
    coordinates (coach.toml interleaves them): the same motion, to rounding (the
    independent coordinates only reorder the linear algebra; measured 8e-15 m)."""
    doc = _doc("coach-template")
    del doc["model"]["dof"]
    m = wb.model_from_dict(doc, source=str(catalog.path("coach-template")))
    assert m.dof_spec[:9] == ["front_body.x", "front_body.y", "front_body.z",
                              "front_body.rz", "front_body.ry", "front_body.rx", "torsion",
                              "fl_lower", "fr_lower"]
    A = wb.simulate(catalog.load("coach"), 1.0, 1e-2)
    B = wb.simulate(m, 1.0, 1e-2)
    idx = [B.coord_names.index(n) for n in A.coord_names]
    assert np.max(np.abs(A.z - B.z[:, idx])) <= TOL


@pytest.mark.parametrize("ref,tpl,options,params,t_end", [
    # the step descent over the road step (the shortened maneuver of tests/test_buggy.py)
    ("buggy-step", "buggy-template", {"x0": 4.6}, BUGGY_PARAMS, 0.45),
    # the first quarter of the coach's lane change (the steering sine starts at t = 0)
    ("coach", "coach-template", {}, ["k_as_f", "c_reb_r", "k_arb_f", "k_tor", "m_fb"], 0.5),
])
def test_template_vehicle_gives_the_same_gradients(ref, tpl, options, params, t_end):
    """Direct and adjoint gradients of the files' objectives from the prepared (static
    equilibrium) start: the same values (measured relative difference 0.0)."""
    ma = vehicle_app.prepare(ref, parameters=options)
    mb = vehicle_app.prepare(tpl, parameters=options)
    np.testing.assert_array_equal(ma.compile().zi0, mb.compile().zi0)
    for method in ("direct", "adjoint"):
        A = sensitivity(ma, method=method, parameters=params, t_end=t_end)
        B = sensitivity(mb, method=method, parameters=params, t_end=t_end)
        assert np.all(A.psi > 0) and np.all(A.gradient != 0)
        np.testing.assert_allclose(B.psi, A.psi, rtol=TOL, atol=0)
        np.testing.assert_allclose(B.gradient, A.gradient, rtol=TOL, atol=0)


# ----------------------------------------------------------------------------------------
# a vehicle of other templates: MacPherson front, five-rod rear, speed control
# ----------------------------------------------------------------------------------------


def compact_vehicle(set_speed=None):
    """The buggy's parameters with a MacPherson front axle (bilinear damper, anti-roll
    bar), a five-rod multi-link rear axle with air springs, and a speed controller on the
    rear wheels (set speed: the initial speed v0 = 3 m/s unless ``set_speed``): a Python
    description given to build_vehicle."""
    doc = _doc("buggy-template")
    spec = doc["vehicle"]
    front, rear = spec["axles"]
    spec["axles"] = [
        {"name": "f", "suspension": "macpherson",
         "lower_in": front["lower_in"], "lower_out": front["lower_out"],
         "tie_out": front["tie_out"], "strut_low": [0.0, 0.54, 0.40],
         "strut_top": [0.0, 0.47, 0.80], "lower_arm": front["lower_arm"],
         "upright": {"mass": 6.0, "com": [0.0, 0.58, 0.3], "inertia": 0.03},
         "wheel": front["wheel"],
         "springs": [{"name": "coil", "on": "upright", "chassis": [0.0, 0.47, 0.80],
                      "arm": [0.0, 0.54, 0.40], "k": "kf", "length": 0.43,
                      "damper": {"slopes": ["cf", 3000.0], "knees": [0.0]}}],
         "anti_roll_bar": {"pivot": [0.25, 0.45, 0.2], "arm": [-0.25, 0.0, 0.0],
                           "point": [0.0, 0.45, 0.17], "link_length": 0.03, "k": 2000.0}},
        {"name": "r", "suspension": "multi-link",
         "upright": {"mass": 8.0, "com": [-2.0, 0.6, 0.3], "inertia": 0.05},
         "rods": [{"name": "upper_lat", "chassis": [-1.95, 0.3, 0.45],
                   "upright": [-1.95, 0.58, 0.45]},
                  {"name": "upper_trail", "chassis": [-1.7, 0.35, 0.42],
                   "upright": [-2.05, 0.58, 0.44]},
                  {"name": "lower_front", "chassis": [-1.9, 0.25, 0.18],
                   "upright": [-1.9, 0.6, 0.16]},
                  {"name": "lower_rear", "chassis": [-2.1, 0.25, 0.18],
                   "upright": [-2.1, 0.6, 0.16]},
                  {"name": "toe", "chassis": [-2.2, 0.3, 0.3], "upright": [-2.15, 0.6, 0.3]}],
         "wheel": rear["wheel"],
         "springs": [{"name": "air", "chassis": [-2.0, 0.55, 0.7], "arm": [-2.0, 0.55, 0.2],
                      "k": "kr", "c": "cr", "length": 0.5,
                      "air": {"area": 0.005, "volume": 0.002, "pressure": 2.0e5}}]},
    ]
    spec["speed_control"] = {"axles": ["r"], "gain": 400.0, "torque_max": 300.0}
    if set_speed is not None:
        spec["speed_control"]["speed"] = set_speed
    return build_vehicle(spec, parameters=doc["parameters"], model={"name": "compact"},
                         road={"z0": 0.0})


def test_expanded_names_of_the_macpherson_and_multi_link_templates():
    m = compact_vehicle()
    assert {"fl_lca", "fl_upright", "fl_strut_top", "fl_wheel", "rl_upright",
            "rl_wheel"} <= set(m.bodies)
    assert m.bodies["fl_strut_top"].mass == 0.0
    assert [j for j in m.joints if j.startswith("fl_")] == ["fl_lower", "fl_lbj",
                                                           "fl_strut_mount", "fl_spin"]
    assert m.joints["rl_upright"].type == "floating"
    assert m.cuts["fl_strut"].type == "cylindrical"
    assert sorted(d for d in m.distances if d.startswith("rl_")) == [
        "rl_lower_front", "rl_lower_rear", "rl_toe", "rl_upper_lat", "rl_upper_trail"]
    assert list(m.springs) == ["fl_coil", "fr_coil", "rl_air", "rr_air"]
    assert m.springs["rl_air"].air is not None and m.springs["fl_coil"].damper is not None
    assert "f_arb.torsion" in m.joint_springs
    sc = m.speed_controls["cruise"]
    assert [w[:2] for w in sc.wheels] == [("rl_wheel", "rl_upright"),
                                          ("rr_wheel", "rr_upright")]
    cm = m.compile()
    # 6 chassis + 2 x (MacPherson 1 + multi-link 1 + spin 2) = 14 (the anti-roll bar adds
    # two coordinates and two droplink equations)
    assert cm.d == 14
    assert "rl_upright.z" in cm.dof_names and "fl_lower" in cm.dof_names


def test_the_rack_steers_the_macpherson_uprights():
    """1 cm of rack travel to the left turns both front uprights to the right by about
    travel / steering-arm length (the tie rods act 0.12 m behind the axle: 0.083 rad;
    within 3 %: the kingpin is inclined and the tie rods are not parallel to the rack)."""
    m = compact_vehicle()
    m.parameters["steer0"].value = 0.01
    sim = wb.simulate(m, 0.002, 0.001)
    assert sim.coordinate("rack")[0] == pytest.approx(0.01, abs=1e-12)
    for side in ("fl", "fr"):
        assert sim.coordinate(f"{side}_lbj.rz")[0] == pytest.approx(-0.01 / 0.12, rel=0.03)


def test_template_vehicle_static_equilibrium_exists():
    """The compact vehicle's static equilibrium (speed controller off at rest): residual
    re-evaluated from the projected forces, no roll, yaw or lateral offset (mirror
    symmetry), the tires in contact (chassis a few mm down: static deflection)."""
    cm = compact_vehicle().compile()
    eq = wb.equilibrium(cm)
    weight = total_weight(cm)
    st = state_terms(wb.statics.at_rest(cm), 0.0, eq.zi, np.zeros(cm.d), eq.z)
    # 1e-10 x weight: the documented default tolerance of workbench.equilibrium
    assert np.max(np.abs(st.Q_bar)) <= 1e-10 * weight
    zi = dict(zip(eq.dof_names, eq.zi))
    assert abs(zi["chassis.rx"]) < 1e-9 and abs(zi["chassis.y"]) < 1e-9
    assert abs(zi["chassis.rz"]) < 1e-9
    assert zi["fl_lower"] == pytest.approx(-zi["fr_lower"], abs=1e-9)   # mirrored arms
    assert zi["rl_upright.z"] == pytest.approx(zi["rr_upright.z"], abs=1e-9)
    assert -0.05 < zi["chassis.z"] < 0.05


def test_template_vehicle_runs_straight_and_the_speed_control_drives_it():
    """From equilibrium at v0 = 3 m/s: the mirror-symmetric vehicle stays on its centre
    line (rounding only: measured 1e-16); at the set speed v0 it keeps it (no resistance
    but the tires' damping: measured 3e-5 m/s lost in 1 s); with the set speed 3.5 m/s the
    controller's drive torque on the rear wheels accelerates it towards 3.5 m/s."""
    for set_speed, lo, hi in ((None, 2.999, 3.0 + 1e-9), (3.5, 3.3, 3.5)):
        m = at_equilibrium(compact_vehicle(set_speed))
        sim = wb.simulate(m, 1.0, 2e-3)
        y = sim.coordinate("chassis.y")
        yaw = sim.coordinate("chassis.rz")
        assert np.max(np.abs(y)) < 1e-9 and np.max(np.abs(yaw)) < 1e-9
        vx = sim.zd[:, sim.coord_names.index("chassis.x")]
        assert lo < vx[-1] < hi, (set_speed, vx[-1])


# ----------------------------------------------------------------------------------------
# errors: the element and the key are named
# ----------------------------------------------------------------------------------------


def _buggy_spec():
    doc = _doc("buggy-template")
    return doc["vehicle"], doc["parameters"]


@pytest.mark.parametrize("edit,match", [
    (lambda v: v["axles"][1].update(suspension="trailing-arms"),
     r"axles\[1\] \('r'\) suspension: unknown suspension template 'trailing-arms'"),
    (lambda v: v["steering"].update(type="pitman"),
     r"\[vehicle\] steering type: unknown steering template 'pitman'; known: lever, rack"),
    (lambda v: v["axles"][0].pop("upper_out"),
     r"axles\[0\] \('f'\) suspension 'double-wishbone': missing key 'upper_out'"),
    (lambda v: v["axles"][1].pop("pivot"),
     r"axles\[1\] \('r'\) suspension 'trailing-arm': missing key 'pivot'"),
    (lambda v: v["axles"][0].update(lower_arm_mass=3.0),
     r"axles\[0\] \('f'\) suspension 'double-wishbone': unknown key 'lower_arm_mass'"),
    (lambda v: v["axles"][0]["wheel"].pop("center"),
     r"axles\[0\] \('f'\) suspension 'double-wishbone' wheel: missing key 'center'"),
    (lambda v: v["axles"][1]["springs"][0].pop("chassis"),
     r"axles\[1\] \('r'\) suspension 'trailing-arm' springs\[0\] \('coil'\): missing key "
     r"'chassis'"),
    (lambda v: v["axles"][1]["springs"][0].update(on="lower"),
     r"springs\[0\] \('coil'\) on: unknown body 'lower' of template 'trailing-arm'"),
    (lambda v: v["chassis"].pop("mass"), r"\[vehicle\] chassis: missing key 'mass'"),
    (lambda v: v.pop("axles"), r"\[vehicle\]: missing key 'axles'"),
    (lambda v: v["steering"].pop("tie_length"),
     r"\[vehicle\] steering \(rack\): missing key 'tie_length'"),
    (lambda v: v.update(speed_control={"axles": ["x"], "gain": 1.0, "torque_max": 1.0}),
     r"\[vehicle\] speed_control axles: unknown axle 'x'; known: f, r"),
    (lambda v: v["axles"][1].update(body="rear_body"),
     r"axles\[1\] \('r'\) suspension 'trailing-arm' body: unknown chassis body 'rear_body'"),
    (lambda v: v["axles"][0].update(tire={"law": "magic-formula", "grip": 1.0}),
     r"axles\[0\] \('f'\) suspension 'double-wishbone' tire: unknown key 'grip'"),
])
def test_bad_descriptions_name_the_element_and_the_key(edit, match):
    spec, params = _buggy_spec()
    spec = copy.deepcopy(spec)
    edit(spec)
    with pytest.raises(ModelError, match=match):
        build_vehicle(spec, parameters=params)


def test_errors_in_a_file_name_the_file(tmp_path):
    text = catalog.path("buggy-template").read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('suspension = "trailing-arm"', 'suspension = "leaf-spring"'),
                   encoding="utf-8")
    with pytest.raises(ModelError, match=r"bad\.toml: \[vehicle\] axles\[1\] .*'leaf-spring'"):
        wb.load_model(bad)
    assert set(SUSPENSIONS) == {"double-wishbone", "trailing-arm", "solid-axle",
                                "macpherson", "multi-link"}


def test_expand_vehicle_shows_the_generated_document():
    spec, _ = _buggy_spec()
    out = expand_vehicle(spec)
    assert [b["name"] for b in out["bodies"]][:3] == ["chassis", "rack", "fl_lca"]
    spring = out["springs"][1]
    # the right side mirrors the left in y
    assert spring["name"] == "fr_coil" and spring["point2"] == "coil"
    fr_lca = next(b for b in out["bodies"] if b["name"] == "fr_lca")
    assert fr_lca["points"]["lbj"] == [0.0, {"param": "y_lbj", "scale": -1.0}, "z_lca"]
    assert out["dof"][-4:] == ["fl_spin", "fr_spin", "rl_spin", "rr_spin"]


# ----------------------------------------------------------------------------------------
# derived files on a template vehicle
# ----------------------------------------------------------------------------------------


def test_a_maneuver_file_on_the_template_buggy_is_the_buggy_maneuver(tmp_path):
    """buggy-dlc.toml with ``base = "buggy-template.toml"``: its ``[[drives]] steering``
    replaces the generated drive of that name, and the lane change is the one of
    buggy-dlc.toml (same trajectory; the car does change lanes)."""
    (tmp_path / "buggy-template.toml").write_text(
        catalog.path("buggy-template").read_text(encoding="utf-8"), encoding="utf-8")
    dlc = catalog.path("buggy-dlc").read_text(encoding="utf-8")
    assert 'base = "buggy-step.toml"' in dlc
    (tmp_path / "dlc.toml").write_text(
        dlc.replace('base = "buggy-step.toml"', 'base = "buggy-template.toml"'),
        encoding="utf-8")
    a = catalog.load("buggy-dlc")
    b = wb.load_model(tmp_path / "dlc.toml")
    assert list(b.drives) == ["steering"]
    A, B = wb.simulate(a, 2.7, 0.015), wb.simulate(b, 2.7, 0.015)   # steering from 1.86 s
    assert A.coord_names == B.coord_names
    assert np.max(np.abs(A.z - B.z)) <= TOL
    assert np.max(np.abs(A.coordinate("chassis.y"))) > 0.05


def test_a_derived_file_merges_the_vehicle_table_key_by_key(tmp_path):
    (tmp_path / "buggy-template.toml").write_text(
        catalog.path("buggy-template").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "variant.toml").write_text(
        'base = "buggy-template.toml"\n\n'
        '[vehicle.chassis]\nq0 = ["x0", 0.0, -0.01, 0.0, 0.0, 0.0]\n\n'
        '[[vehicle.axles]]\nname = "r"\npivot = ["x_ta", "y_ta", "z_sr_low"]\n',
        encoding="utf-8")
    m = wb.load_model(tmp_path / "variant.toml")
    ref = catalog.load("buggy-template")
    assert m.joints["chassis"].q0[2] == -0.01 and m.bodies["chassis"].mass == "mc"
    assert m.bodies["chassis"].points["rl_pivot"] == ["x_ta", "y_ta", "z_sr_low"]
    assert m.bodies["rl_arm"].points["pivot"] == ["x_ta", "y_ta", "z_sr_low"]
    assert _names(m) == _names(ref)              # the rest of the axle is the base's


def test_an_expanded_vehicle_saves_as_an_ordinary_model_file(tmp_path):
    """The expansion is an ordinary model: written back (JSON, no [vehicle] section) and
    reloaded it compiles to the same field vector, parameter binding and coordinates."""
    m = catalog.load("coach-template")
    m2 = wb.load_model(wb.save_json(m, tmp_path / "coach.json"))
    a, b = m.compile(), m2.compile()
    np.testing.assert_array_equal(a.p_const, b.p_const)
    np.testing.assert_array_equal(a.G, b.G)
    assert list(a.dof_names) == list(b.dof_names)
    assert m2.meta["vehicle"] == ["axle 'f': double-wishbone", "axle 'r': solid-axle"]


# ----------------------------------------------------------------------------------------
# a template vehicle doing maneuvers, with gradients (issue 24, item 6)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,options,params", [
    ("slalom", {"speed": 8.0, "t0": 0.3}, ["kf", "cr", "slalom_steer"]),
    ("iso3888-1", {"speed": 11.0}, ["kf", "cf", "mc"]),
])
def test_template_vehicle_maneuver_gradients(kind, options, params):
    """The template buggy (buggy-template.toml, 45 lines of [vehicle]) driving a slalom
    and the ISO 3888-1 lane change (workbench.maneuver): the exact gradients of the roll
    objective are those of the hand-written buggy doing the same maneuver (the same model
    after expansion: 0.0 measured), direct = adjoint (one linear recursion forward and
    transposed: 1e-9 relative asserted), and a central difference of one parameter agrees
    (the differences' truncation and Newton noise: 1e-5 relative asserted)."""
    import workbench.objectives as O

    obj = [O.angular_velocity("roll", "chassis", "x")]
    kw = dict(objectives=obj, parameters=params, t_end=2.4, dt=0.015)
    grads = []
    for name in ("buggy-template", "buggy-step"):
        m = wb.maneuver(catalog.load(name), kind, dt=0.015, **options)
        v0 = m.parameters["v0"].si_value
        m = vehicle_app.prepare(m, parameters={"v_eps": v0 / 30.0})
        D = sensitivity(m, method="direct", **kw)
        A = sensitivity(m, method="adjoint", simulation=D.simulation, **kw)
        assert np.all(D.gradient != 0.0)
        np.testing.assert_allclose(A.gradient, D.gradient, rtol=1e-9, atol=0)
        grads.append(D.gradient)
        if name == "buggy-template":
            F = sensitivity(m, method="fd", objectives=obj, parameters=params[:1],
                            t_end=2.4, dt=0.015)
            np.testing.assert_allclose(D.gradient[:, :1], F.gradient, rtol=1e-5, atol=0)
    np.testing.assert_allclose(grads[0], grads[1], rtol=TOL, atol=0)
