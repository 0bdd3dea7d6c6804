"""Maneuvers as data (workbench.maneuvers, docs/maneuvers.md): the re-expressed ISO
3888-1 double lane change of buggy-dlc.toml gives the trajectory of the explicit drive it
replaced; every maneuver builds and runs on the buggy and its path follows the maneuver
(slalom, sine steer, step steer, constant radius, ISO 3888-2); the model-file form equals
the Python form; bad options raise ModelError naming the maneuver and the option; direct =
adjoint on the slalom; the coach (revolute steering lever, speed controller) takes the same
maneuvers."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import workbench
from workbench.apps import vehicle
from workbench.errors import ModelError
from workbench.maneuvers import MANEUVERS, maneuver, path_radius, steering_geometry
from workbench.model import catalog
from workbench.model.files import load_model
from workbench.sensitivities.driver import sensitivity

DATA = Path(__file__).parent / "data"
DT = 0.015                                   # the buggy double lane change's step


@pytest.fixture(scope="module")
def buggy():
    return catalog.load("buggy-step")


def _prepared(model, own_v_eps=False):
    """The maneuver's start (static equilibrium, rolling); the buggy's friction law gets
    the regularisation speed v_eps = v0/30 of its files (buggy-step.toml, buggy-dlc.toml:
    a slip stiffness of 27 N/N/rad at the maneuver speed; with buggy-step's 0.1 m/s at
    8-10 m/s the law is so stiff that Newton needs sub-steps at 15 ms)."""
    over = {}
    if not own_v_eps and "v_eps" in model.parameters and "v0" in model.parameters:
        over["v_eps"] = model.parameters["v0"].si_value / 30.0
    return vehicle.prepare(model, parameters=over)


def _run(model, t_end=None, own_v_eps=False):
    m = _prepared(model, own_v_eps)
    sim = workbench.simulate(m, t_end or model.meta["t_end"], model.meta["dt"])
    # one trapezoidal step per interval (no Newton sub-steps)
    kind = getattr(sim, "step_kind", None)
    assert kind is None or np.all(kind[1:] == 1)
    return sim


def _yaw_rate(sim, body="chassis"):
    return sim.zd[:, sim.coord_names.index(f"{body}.rz")]


def _zero_crossings(t, f):
    """Times of the sign changes of ``f`` (linear interpolation)."""
    i = np.nonzero(np.sign(f[1:]) != np.sign(f[:-1]))[0]
    return t[i] - f[i] * (t[i + 1] - t[i]) / (f[i + 1] - f[i])


# ----------------------------------------------------------------------------------------
# the linkage ratio and the double lane change
# ----------------------------------------------------------------------------------------


def test_steering_geometry_is_measured_on_the_linkage(buggy):
    g = steering_geometry(buggy)
    # the rack moves the tie rods sideways at the steering arms' ends, |x_steer| = 0.12 m
    # behind the kingpins: wheel steer ~ -travel / 0.12 (buggy-step.toml header: ~8.3 rad/m)
    x_steer = buggy.parameters["x_steer"].si_value
    assert g["ratio"] == pytest.approx(1.0 / x_steer, rel=1e-4)
    assert g["ratio"] == pytest.approx(-8.3333, rel=1e-4)      # buggy-dlc's provenance
    assert sorted(g["steered"]) == ["fl_tire", "fr_tire"]
    assert g["wheelbase"] == pytest.approx(2.0, abs=1e-9)
    assert g["x_front"] == pytest.approx(-0.5, abs=1e-9)
    assert g["track"] == pytest.approx(1.3, abs=1e-9)
    coach = steering_geometry(catalog.load("coach"))
    assert coach["unit"] == "rad" and coach["ratio"] == pytest.approx(1.0, rel=1e-3)
    assert coach["wheelbase"] == pytest.approx(6.0, rel=1e-9)


def test_dlc_file_gives_the_trajectory_of_its_former_explicit_drive(tmp_path):
    # the file as it was before the maneuver (tests/data/buggy-dlc-legacy.toml, an explicit
    # [[drives]] steps table), next to its base file
    shutil.copy(catalog.path("buggy-step"), tmp_path / "buggy-step.toml")
    shutil.copy(DATA / "buggy-dlc-legacy.toml", tmp_path / "buggy-dlc.toml")
    old, new = load_model(tmp_path / "buggy-dlc.toml"), catalog.load("buggy-dlc")
    lines = catalog.path("buggy-dlc").read_text().splitlines()
    assert "[maneuver]" in lines and "[[drives]]" not in lines
    assert new.drives["steering"].function == old.drives["steering"].function
    assert new.parameters == old.parameters                    # values and provenance
    assert (new.meta["t_end"], new.meta["dt"]) == (old.meta["t_end"], old.meta["dt"]) \
        == (12.0, 0.015)
    mm = new.meta["maneuver"]
    assert mm["kind"] == "iso3888-1" and mm["open_loop"]
    # the file's rounded values are its derivation: the computed ones agree to 3e-5
    for name, value in mm["derived"].items():
        assert name in mm["pinned"]
        assert value == pytest.approx(old.parameters[name].value, rel=3e-5), name
    so, sn = _run(old, own_v_eps=True), _run(new, own_v_eps=True)
    assert so.z.shape == sn.z.shape == (801, sn.z.shape[1])
    scale = np.max(np.abs(so.z))
    assert np.max(np.abs(sn.z - so.z)) <= 1e-12 * scale
    assert np.max(np.abs(sn.zd - so.zd)) <= 1e-12 * np.max(np.abs(so.zd))
    # the course of the maneuver is the one of workbench.apps.vehicle.iso3888_1_lanes
    for mine, lane in zip(mm["course"], vehicle.iso3888_1_lanes(new), strict=True):
        assert mine == pytest.approx(lane, rel=1e-12)


def test_iso3888_1_from_python_reproduces_the_file_derivation(buggy):
    m = maneuver(buggy, "iso3888-1", speed=11.0, dt=DT)
    dlc = catalog.load("buggy-dlc")
    for name, value in m.meta["maneuver"]["derived"].items():
        assert m.parameters[name].value == value                  # computed, not pinned
        assert value == pytest.approx(dlc.parameters[name].value, rel=3e-5), name
    assert m.parameters["v0"].value == 11.0
    # every initial rate scaled from the buggy's 3 m/s: chassis speed and wheel spins
    R = buggy.parameters["R_w"].si_value
    assert m.joints["chassis"].qd0[0] == pytest.approx(11.0)
    assert m.joints["fl_spin"].qd0[0] == pytest.approx(11.0 / R)
    assert buggy.joints["chassis"].qd0[0] == 3.0                 # the input is not changed
    assert m.meta["t_end"] == pytest.approx(round(m.meta["t_end"] / DT) * DT, abs=1e-12)


# ----------------------------------------------------------------------------------------
# each maneuver runs on the buggy and its path follows the maneuver
# ----------------------------------------------------------------------------------------


def test_slalom_weaves_around_the_cones_with_their_period(buggy):
    v, s, Y = 8.0, 18.0, 1.0
    m = maneuver(buggy, "slalom", speed=v, spacing=s, amplitude=Y, cones=5, dt=DT)
    mm = m.meta["maneuver"]
    assert mm["half_period"] == pytest.approx(s / v)
    # kinematic bicycle model of the quintic half-waves: wheel steer (28/3) Y L / s^2
    assert mm["wheel_steer"] == pytest.approx(28 / 3 * Y * 2.0 / s ** 2, rel=1e-12)
    assert m.parameters["slalom_steer"].unit == "m"
    sim = _run(m)
    t, x, y = sim.t, sim.coordinate("chassis.x"), sim.coordinate("chassis.y")
    peaks = np.array(mm["peak_times"])
    yp = np.interp(peaks, t, y)
    axis = 0.5 * (np.mean(yp[0::2]) + np.mean(yp[1::2]))      # midway between the sides
    dev = yp - axis
    # the lateral position about the slalom axis changes sign from cone to cone ...
    assert np.all(np.sign(dev[1:]) == -np.sign(dev[:-1]))
    # ... by the lateral amplitude of the option (kinematic model; measured 1.00 m)
    assert np.all(np.abs(np.abs(dev) - Y) < 0.1 * Y)
    # ... with the cone period: crossings of the axis one cone spacing apart
    inside = (t > peaks[0]) & (t < peaks[-1])
    zc = _zero_crossings(t[inside], (y - axis)[inside])
    assert len(zc) == 4
    np.testing.assert_allclose(np.diff(zc), s / v, rtol=0.03)
    # the cones pass at one spacing along x
    np.testing.assert_allclose(np.diff(np.interp(peaks, t, x)), s, rtol=0.02)
    # no drift: heading back to zero after the exit half-wave (2/3 entry and exit peaks)
    assert abs(sim.coordinate("chassis.rz")[-1]) < 2e-3


def test_sine_steer_yaw_rate_oscillates_at_the_input_frequency(buggy):
    f = 0.5
    m = maneuver(buggy, "sine-steer", speed=10.0, amplitude=0.02, frequency=f, periods=3,
                 t0=1.0, dt=DT)
    sim = _run(m)
    t, r = sim.t, _yaw_rate(sim)
    window = (t > 1.5) & (t < 6.5)            # crossings at 2, 3, ..., 6 s (input 1-7 s)
    zc = _zero_crossings(t[window], r[window])
    assert len(zc) == 5
    f_est = 1.0 / (2 * np.mean(np.diff(zc)))
    assert f_est == pytest.approx(f, rel=0.01)                  # measured 0.500 Hz
    # yaw-rate amplitude close to the kinematic v delta / L = 0.1 rad/s
    assert 0.07 < np.max(np.abs(r)) < 0.13


def test_step_steer_yaw_rate_settles(buggy):
    v, A = 10.0, 0.02
    m = maneuver(buggy, "step-steer", speed=v, amplitude=A, rise=0.2, t0=1.0, dt=DT)
    assert m.meta["t_end"] == pytest.approx(5.205)
    sim = _run(m)
    t, r = sim.t, _yaw_rate(sim)
    assert np.max(np.abs(r[t < 1.0])) < 1e-9                    # straight before the step
    late = t > t[-1] - 2.0
    r_ss = r[late].mean()
    assert np.max(np.abs(r[late] - r_ss)) < 1e-3 * abs(r_ss)    # settled (measured 3e-4)
    kin = m.meta["maneuver"]["kinematic_yaw_rate"]
    assert kin == pytest.approx(v * A / 2.0)
    assert 0.8 * kin < r_ss < 1.2 * kin                          # measured 1.000 kin


def test_constant_radius_path(buggy):
    R0 = 15.0
    m = maneuver(buggy, "constant-radius", speed=8.0, radius=R0, dt=DT)
    mm = m.meta["maneuver"]
    assert mm["speed_controls"] == []                            # the buggy rolls freely
    sim = _run(m)
    x, y = sim.coordinate("chassis.x"), sim.coordinate("chassis.y")
    n = len(x)
    last = slice(int(0.6 * n), n)
    fit = path_radius(x[last], y[last])
    # constant radius over the last 40 % (half a circle after the ramp): rms 0.4 mm
    assert fit["rms"] < 1e-3 * fit["radius"]
    halves = [path_radius(x[k], y[k])["radius"] for k in
              (slice(int(0.6 * n), int(0.8 * n)), slice(int(0.8 * n), n))]
    assert halves[0] == pytest.approx(halves[1], rel=0.01)
    # within a factor of the kinematic radius L / tan(delta) (measured 14.96 m for 15 m)
    assert 0.8 * R0 < fit["radius"] < 1.25 * R0
    assert mm["kinematic_radius"] == pytest.approx(R0)


def test_iso3888_2_goes_through_the_offset_lane(buggy):
    m = maneuver(buggy, "iso3888-2", speed=8.0, dt=DT)
    mm = m.meta["maneuver"]
    b = m.parameters["oa_width"].si_value
    assert b == pytest.approx(1.3 + 0.25)                        # measured track + 0.25 m
    course = mm["course"]
    # ISO 3888-2 (Project Chrono's ISO3888_Helper): 12 / 13.5 / 11 / 12.5 / 12 m, 61 m
    assert [c["x1"] - c["x0"] for c in course] == pytest.approx([12.0, 11.0, 12.0])
    assert course[1]["x0"] - course[0]["x1"] == pytest.approx(13.5)
    assert course[2]["x0"] - course[1]["x1"] == pytest.approx(12.5)
    assert course[2]["x1"] - course[0]["x0"] == pytest.approx(61.0)
    assert course[1]["y_left"] - course[1]["y_right"] == pytest.approx(b + 1.0)
    assert course[1]["y_right"] - course[0]["y_left"] == pytest.approx(1.0)
    sim = _run(m)
    x, y = sim.coordinate("chassis.x"), sim.coordinate("chassis.y")
    for k, sec in enumerate(course):
        inside = (x >= sec["x0"]) & (x <= sec["x1"])
        assert inside.any()
        # the centre of mass stays inside each gated section (measured 2.71-2.83 m in
        # section 3, whose offset is to the left: positive y)
        assert np.all((y[inside] > sec["y_right"]) & (y[inside] < sec["y_left"])), k
    assert mm["offsets"][0] > 0 and np.max(y) > 0.5 * mm["offsets"][0]


# ----------------------------------------------------------------------------------------
# model-file form, errors
# ----------------------------------------------------------------------------------------


def test_model_file_form_equals_the_python_form(tmp_path, buggy):
    shutil.copy(catalog.path("buggy-step"), tmp_path / "buggy-step.toml")
    (tmp_path / "slalom.toml").write_text(
        'base = "buggy-step.toml"\n'
        '[model]\nname = "buggy-slalom"\n'
        '[model.meta]\ndt = 0.015\n'
        '[maneuver]\nkind = "slalom"\nspeed = {value = 28.8, unit = "km/h"}\n'
        'spacing = {value = 1800, unit = "cm"}\ncones = 3\n')
    f = load_model(tmp_path / "slalom.toml")
    p = maneuver(buggy, "slalom", speed=8.0, spacing=18.0, cones=3, dt=DT)
    assert f.name == "buggy-slalom"
    assert f.drives["steering"].function == p.drives["steering"].function
    assert f.parameters["v0"].value == pytest.approx(8.0)
    for name in ("slalom_spacing", "slalom_amplitude", "slalom_steer"):
        assert f.parameters[name].value == pytest.approx(p.parameters[name].value, rel=1e-12)
        assert f.parameters[name].provenance.strip()
    assert f.meta["t_end"] == p.meta["t_end"] and f.meta["dt"] == 0.015
    # a parameter the derived file declares itself is kept over the derived value
    (tmp_path / "pinned.toml").write_text(
        'base = "buggy-step.toml"\n[maneuver]\nkind = "step-steer"\n'
        '[parameters.step_steer]\nvalue = -0.001\nunit = "m"\nprovenance = "ours"\n')
    g = load_model(tmp_path / "pinned.toml")
    assert g.parameters["step_steer"].value == -0.001
    assert g.meta["maneuver"]["derived"]["step_steer"] == pytest.approx(0.02 / -8.33333,
                                                                        rel=1e-5)


@pytest.mark.parametrize("kind, options, words", [
    ("zigzag", {}, ["zigzag", "slalom"]),
    ("slalom", {"spacingg": 18.0}, ["slalom", "spacingg"]),
    ("slalom", {"spacing": -1.0}, ["slalom", "spacing", "positive"]),
    ("slalom", {"cones": 2.5}, ["slalom", "cones"]),
    ("slalom", {"amplitude": "big"}, ["slalom", "amplitude"]),
    ("sine-steer", {"frequency": 0.0}, ["sine-steer", "frequency"]),
    ("step-steer", {"rise": {"value": 1, "unit": "m"}}, ["step-steer", "rise", "time"]),
    ("constant-radius", {"radius": math.inf}, ["constant-radius", "radius"]),
    ("iso3888-1", {"drive": "brake"}, ["iso3888-1", "drive", "brake"]),
    ("iso3888-2", {"x0": -20.0}, ["iso3888-2", "x0"]),
])
def test_bad_options_raise_model_errors_naming_maneuver_and_option(buggy, kind, options,
                                                                   words):
    with pytest.raises(ModelError) as info:
        maneuver(buggy, kind, **options)
    for w in words:
        assert w in str(info.value)


def test_bad_maneuver_table_in_a_file(tmp_path):
    shutil.copy(catalog.path("buggy-step"), tmp_path / "buggy-step.toml")
    f = tmp_path / "m.toml"
    f.write_text('base = "buggy-step.toml"\n[maneuver]\nkind = "slalom"\nspeed = "fast"\n')
    with pytest.raises(ModelError, match=r"\[maneuver\].*slalom.*'speed'"):
        load_model(f)
    f.write_text('base = "buggy-step.toml"\n[maneuver]\nspeed = 3.0\n')
    with pytest.raises(ModelError, match="kind"):
        load_model(f)
    f.write_text('[maneuver]\nkind = "slalom"\n')
    with pytest.raises(ModelError, match="steering"):            # no steering drive
        load_model(f)


def test_every_kind_is_documented():
    text = (Path(__file__).parents[1] / "docs" / "maneuvers.md").read_text()
    for kind, spec in MANEUVERS.items():
        assert f"`{kind}`" in text
        for opt in spec.options:
            assert f"`{opt.key}`" in text, (kind, opt.key)
    assert "open loop" in text and "ISO 4138" in text


# ----------------------------------------------------------------------------------------
# gradients, other vehicle
# ----------------------------------------------------------------------------------------


def test_slalom_direct_equals_adjoint(buggy):
    m = _prepared(maneuver(buggy, "slalom", speed=8.0, t0=0.3, dt=DT))
    kw = dict(parameters=["kf", "slalom_steer"], t_end=2.01)
    D = sensitivity(m, method="direct", **kw)
    A = sensitivity(m, method="adjoint", simulation=D.simulation, **kw)
    assert np.all(D.gradient != 0.0)
    # the same linear recursion run forward and transposed backward
    np.testing.assert_allclose(A.gradient, D.gradient, rtol=1e-9, atol=0)


def test_coach_takes_the_same_maneuvers():
    coach = catalog.load("coach")
    m = maneuver(coach, "step-steer", amplitude=0.01, t0=0.2, rise=0.2, t_end=1.0)
    mm = m.meta["maneuver"]
    assert mm["joint"] == "steer" and m.parameters["step_steer"].unit == "rad"
    assert mm["speed_controls"] == ["cruise"]                    # v0 held by the controller
    assert m.parameters["step_steer"].value == pytest.approx(0.01 / mm["ratio"])
    sim = _run(m)
    r = _yaw_rate(sim, "front_body")
    assert abs(r[0]) < 1e-12 and r[-1] > 0.5 * mm["speed"] * 0.01 / mm["wheelbase"]
