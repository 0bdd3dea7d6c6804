"""Shared builders and *independent* reference computations for the test suite.

Nothing in the reference part of this file calls the numerical kernels: the forward
position kinematics (:func:`ref_body_poses`) is re-implemented in plain numpy from the
builder data (``Model`` dataclasses) and the joint semantics stated in the docstring of
``workbench/model/builder.py``; velocities, Jacobians and energies are obtained from it by
finite (or complex-step) differentiation.  The kernels are then checked against these.
"""

from __future__ import annotations

import importlib
import math

import numpy as np

from workbench import Model
from workbench.model.elements import GROUND

ALL_JOINT_TYPES = ("revolute", "prismatic", "cylindrical", "universal", "spherical",
                   "floating", "fixed")


# ----------------------------------------------------------------------------------------
# small geometry helpers (numpy only, dtype-generic so that complex steps pass through)
# ----------------------------------------------------------------------------------------


def rot(axis, q):
    """Rodrigues rotation of angle ``q`` about the unit vector ``axis``."""
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + np.sin(q) * K + (1.0 - np.cos(q)) * (K @ K)


def vee(W):
    return np.array([W[2, 1], W[0, 2], W[1, 0]])


def random_unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q @ np.diag(np.sign(np.diag(r)))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def random_inertia(rng):
    """A physically admissible centroidal inertia tensor (triangle inequality holds)."""
    s = rng.uniform(0.02, 0.2, size=3)          # second moments sum(m x^2) per axis
    principal = np.array([s[1] + s[2], s[0] + s[2], s[0] + s[1]])
    R = random_rotation(rng)
    return R @ np.diag(principal) @ R.T


def inertia_tuple(I):
    """(Ixx, Iyy, Izz, Ixy, Ixz, Iyz) as tensor components (the builder's convention)."""
    return (I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2])


def inertia_tensor(values):
    v = [float(x) for x in values]
    if len(v) == 3:
        v += [0.0, 0.0, 0.0]
    return np.array([[v[0], v[3], v[4]], [v[3], v[1], v[5]], [v[4], v[5], v[2]]])


# ----------------------------------------------------------------------------------------
# random models
# ----------------------------------------------------------------------------------------


def random_tree(seed, joint_types=ALL_JOINT_TYPES, gravity=None, name="random-tree",
                forces=False, shuffle=False):
    """An open tree with one body per entry of ``joint_types``, random topology (each body
    hangs from ground or an earlier body), random joint locations, axes, orientations,
    masses, centres of mass and full (non-diagonal) inertia tensors.  Every body carries
    two named points ``p0`` and ``p1``.

    ``shuffle`` permutes the joint types (so the tree shape and the position of each
    type in it change with the seed).  With ``forces`` the model also gets a
    point-to-point spring-damper, a joint spring-damper, an applied force and an applied
    torque.
    """
    rng = np.random.default_rng(seed)
    joint_types = list(joint_types)
    if shuffle:
        rng.shuffle(joint_types)
    g = random_unit(rng) * 9.81 if gravity is None else gravity
    m = Model(name, gravity=tuple(g))
    names = []
    for i, jt in enumerate(joint_types):
        b = f"b{i}"
        m.body(b, mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.5, 0.5, 3)),
               inertia=inertia_tuple(random_inertia(rng)),
               points={"p0": tuple(rng.uniform(-0.6, 0.6, 3)),
                       "p1": tuple(rng.uniform(-0.6, 0.6, 3))})
        parent = GROUND if i == 0 else ([GROUND] + names)[int(rng.integers(0, len(names) + 1))]
        m.joint(f"j{i}", jt, parent, b,
                parent_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                child_point=tuple(rng.uniform(-0.5, 0.5, 3)),
                axis=tuple(random_unit(rng)), axis2=tuple(random_unit(rng)),
                orientation=random_rotation(rng))
        names.append(b)
    if forces:
        m.spring("spring", GROUND, (0.3, -0.2, 0.4), names[-1], "p0", k=40.0, c=3.0,
                 length=0.2)
        first_with_coord = next(f"j{i}" for i, jt in enumerate(joint_types) if jt != "fixed")
        m.joint_spring("jspring", first_with_coord, k=7.0, c=0.5, q0=0.3)
        m.force("push", names[len(names) // 2], "p1", (0.3, -1.0, 2.0),
                {"type": "sine", "amplitude": 2.0, "omega": 3.0, "phase": 0.4})
        m.torque("twist", names[0], (1.0, 0.5, -0.2), 1.5)
    return m


def random_state(cm, seed, scale=0.7):
    """Random coordinates (Euler-angle pitch kept away from +-pi/2), rates, accelerations."""
    rng = np.random.default_rng(seed)
    n = cm.n
    z = rng.uniform(-scale, scale, n)
    zd = rng.uniform(-1.0, 1.0, n)
    zdd = rng.uniform(-1.0, 1.0, n)
    return z, zd, zdd


# ----------------------------------------------------------------------------------------
# independent forward kinematics (from the builder data, not from the compiled arrays)
# ----------------------------------------------------------------------------------------


def _coords_of(cm, joint):
    return [k for k, j in enumerate(cm.coord_joint) if j == joint]


def _tree_order(model):
    order, placed = [], {GROUND}
    remaining = list(model.joints.values())
    while remaining:
        for j in list(remaining):
            if j.parent in placed:
                order.append(j)
                placed.add(j.child)
                remaining.remove(j)
    return order


def num(model, x):
    """Resolve a scalar field of the builder: a number, a parameter name or
    ``(name, scale)`` (SI values)."""
    if isinstance(x, str):
        return model.parameters[x].si_value
    if isinstance(x, (tuple, list)):
        return model.parameters[x[0]].si_value * float(x[1])
    return float(x)


def _vec(model, v):
    """Resolve a numeric 3-vector field."""
    return np.array([num(model, x) for x in v])


def _point(model, body, spec):
    if isinstance(spec, str):
        return _vec(model, model.bodies[body].points[spec])
    return _vec(model, spec)


def ref_body_poses(model, cm, z):
    """Global pose ``(r, A)`` of every body's frame: ``x_global = r + A x_body``.

    Joint semantics (model.py docstring): the joint point ``child_point`` of the child
    coincides with ``parent_point`` of the parent, displaced by the joint translation;
    at zero coordinates the child has orientation ``orientation`` relative to the parent.
    Revolute: ``Rot(axis, q) C``; prismatic: translation ``axis q``; cylindrical: both;
    universal: ``Rot(axis, q1) C Rot(axis2, q2)`` (axis2 fixed in the child); spherical:
    ``Rz Ry Rx C``; floating: translation ``(x, y, z)`` then ``Rz Ry Rx C`` (parent axes).
    """
    dtype = np.result_type(z.dtype, float)
    poses = {GROUND: (np.zeros(3, dtype=dtype), np.eye(3, dtype=dtype))}
    ex, ey, ez = np.eye(3)
    for j in _tree_order(model):
        rp, Ap = poses[j.parent]
        q = [z[k] for k in _coords_of(cm, j.name)]
        a = np.asarray(j.axis, dtype=float)
        C = np.eye(3) if j.orientation is None else np.asarray(j.orientation, dtype=float)
        shift = np.zeros(3, dtype=dtype)
        if j.type == "revolute":
            R = rot(a, q[0]) @ C
        elif j.type == "prismatic":
            shift = a * q[0]
            R = C
        elif j.type == "cylindrical":
            shift = a * q[0]
            R = rot(a, q[1]) @ C
        elif j.type == "universal":
            R = rot(a, q[0]) @ C @ rot(np.asarray(j.axis2, dtype=float), q[1])
        elif j.type == "spherical":
            R = rot(ez, q[0]) @ rot(ey, q[1]) @ rot(ex, q[2]) @ C
        elif j.type == "floating":
            shift = np.array([q[0], q[1], q[2]])
            R = rot(ez, q[3]) @ rot(ey, q[4]) @ rot(ex, q[5]) @ C
        else:
            R = C.astype(dtype)
        A = Ap @ R
        pp = _point(model, j.parent, j.parent_point)
        cp = _point(model, j.child, j.child_point)
        x_joint = rp + Ap @ (pp + shift)
        poses[j.child] = (x_joint - A @ cp, A)
    return poses


def ref_point(model, cm, z, body, spec):
    r, A = ref_body_poses(model, cm, z)[body]
    return r + A @ _point(model, body, spec)


def ref_body_mass_data(model, name):
    b = model.bodies[name]
    return num(model, b.mass), _vec(model, b.com), \
        inertia_tensor([num(model, x) for x in b.inertia])


# ----------------------------------------------------------------------------------------
# independent Cartesian reference dynamics
# ----------------------------------------------------------------------------------------


def ref_jacobians(model, cm, z, method="central", h=None):
    """Per body: ``(m, J_v, J_w, I_G)`` with ``J_v`` the 3 x n Jacobian of the global
    centre of mass and ``J_w`` the 3 x n angular-velocity Jacobian (``omega = vee(dA A^T)``
    column by column), both by differentiating :func:`ref_body_poses` with respect to z.

    ``method="central"``: central differences (step ``h``, default 1e-6);
    ``method="complex"``: complex step (exact to rounding, step 1e-30).
    """
    n = cm.n
    bodies = [b for b in model.bodies if b != GROUND]
    data = {b: ref_body_mass_data(model, b) for b in bodies}

    def com_and_A(zz):
        poses = ref_body_poses(model, cm, zz)
        return {b: (poses[b][0] + poses[b][1] @ data[b][1], poses[b][1]) for b in bodies}

    base = com_and_A(np.asarray(z, dtype=float))
    Jv = {b: np.zeros((3, n)) for b in bodies}
    Jw = {b: np.zeros((3, n)) for b in bodies}
    for k in range(n):
        if method == "complex":
            step = 1e-30 if h is None else h
            zc = np.asarray(z, dtype=complex).copy()
            zc[k] += 1j * step
            s = com_and_A(zc)
            for b in bodies:
                Jv[b][:, k] = s[b][0].imag / step
                dA = s[b][1].imag / step
                Jw[b][:, k] = vee(dA @ base[b][1].T)
        else:
            step = 1e-6 if h is None else h
            zp = np.array(z, dtype=float)
            zm = np.array(z, dtype=float)
            zp[k] += step
            zm[k] -= step
            sp, sm = com_and_A(zp), com_and_A(zm)
            for b in bodies:
                Jv[b][:, k] = (sp[b][0] - sm[b][0]) / (2 * step)
                dA = (sp[b][1] - sm[b][1]) / (2 * step)
                Jw[b][:, k] = vee(dA @ base[b][1].T)
    out = {}
    for b in bodies:
        m, _, Ib = data[b]
        A = base[b][1]
        out[b] = (m, Jv[b], Jw[b], A @ Ib @ A.T, base[b][0])
    return out


def ref_mass_matrix(model, cm, z, method="central", h=None):
    """``M = sum_b m J_v^T J_v + J_w^T I_G J_w`` (Cartesian reference-point computation)."""
    M = np.zeros((cm.n, cm.n))
    for m, Jv, Jw, IG, _ in ref_jacobians(model, cm, z, method, h).values():
        M += m * Jv.T @ Jv + Jw.T @ IG @ Jw
    return M


def ref_kinetic_energy(model, cm, z, zd, method="complex"):
    """Body sum ``0.5 m |v_G|^2 + 0.5 w^T I_G w`` with the reference Jacobians."""
    T = 0.0
    for m, Jv, Jw, IG, _ in ref_jacobians(model, cm, z, method).values():
        v, w = Jv @ zd, Jw @ zd
        T += 0.5 * m * v @ v + 0.5 * w @ IG @ w
    return T


def ref_potential_energy(model, cm, z):
    """Gravity (``-sum m g . x_G``), point-to-point and joint spring energies."""
    g = np.asarray(model.gravity, dtype=float)
    poses = ref_body_poses(model, cm, np.asarray(z, dtype=float))
    V = 0.0
    for b in model.bodies:
        if b == GROUND:
            continue
        m, com, _ = ref_body_mass_data(model, b)
        r, A = poses[b]
        V -= m * g @ (r + A @ com)
    for s in model.springs.values():
        x1 = poses[s.body1][0] + poses[s.body1][1] @ _point(model, s.body1, s.point1)
        x2 = poses[s.body2][0] + poses[s.body2][1] @ _point(model, s.body2, s.point2)
        V += 0.5 * num(model, s.k) * (np.linalg.norm(x2 - x1) - num(model, s.length)) ** 2
    for s in model.joint_springs.values():
        k = _coords_of(cm, s.joint)[s.index]
        V += 0.5 * num(model, s.k) * (z[k] - num(model, s.q0)) ** 2
    return V


def ref_energy(model, cm, z, zd):
    """Mechanical energy from the independent kinematics (kinetic + potential)."""
    return ref_kinetic_energy(model, cm, z, zd) + ref_potential_energy(model, cm, z)


def ref_generalized_forces(model, cm, t, z, zd):
    """Generalised forces ``Q`` of gravity, springs, joint springs, applied loads, computed
    from the reference kinematics (point Jacobians by complex step)."""
    n = cm.n
    Q = np.zeros(n)
    g = np.asarray(model.gravity)
    jac = ref_jacobians(model, cm, z, "complex")
    for b, (m, Jv, Jw, IG, xg) in jac.items():
        Q += Jv.T @ (m * g)

    def point_jac(body, spec):
        x0 = ref_point(model, cm, np.asarray(z, float), body, spec) if body != GROUND \
            else _point(model, body, spec)
        J = np.zeros((3, n))
        if body != GROUND:
            for k in range(n):
                zc = np.asarray(z, dtype=complex).copy()
                zc[k] += 1e-30j
                J[:, k] = ref_point(model, cm, zc, body, spec).imag / 1e-30
        return x0, J

    for s in model.springs.values():
        x1, J1 = point_jac(s.body1, s.point1)
        x2, J2 = point_jac(s.body2, s.point2)
        d = x2 - x1
        L = np.linalg.norm(d)
        e = d / L
        dL = e @ (J2 - J1)                 # dL/dz
        Ld = dL @ zd
        T = num(model, s.k) * (L - num(model, s.length)) + num(model, s.c) * Ld
        Q += -T * dL
    for s in model.joint_springs.values():
        k = _coords_of(cm, s.joint)[s.index]
        Q[k] += -num(model, s.k) * (z[k] - num(model, s.q0)) - num(model, s.c) * zd[k]
    for ld in model.loads.values():
        f = ld.function(t)
        d = np.asarray(ld.direction, dtype=float)
        if ld.kind == "force":
            _, J = point_jac(ld.body, ld.point)
            Q += J.T @ (f * d)
        else:
            Q += jac[ld.body][2].T @ (f * d)
    return Q


def ref_tau_lagrange(model, cm, t, z, zd, zdd, h=1e-5):
    """``tau = d/dt(dT/dzd) - dT/dz - Q`` (Lagrange's equations), with ``dT/dzd = M(z) zd``
    (M from complex-step Jacobians) differentiated along ``z(t) = z + zd s + zdd s^2/2``
    by central differences in ``s``, and ``dT/dz`` by central differences in z."""
    n = cm.n

    def p_of(s):
        zs = z + zd * s + 0.5 * zdd * s * s
        return ref_mass_matrix(model, cm, zs, "complex") @ (zd + zdd * s)

    ddt = (p_of(h) - p_of(-h)) / (2 * h)
    dTdz = np.zeros(n)
    for k in range(n):
        zp, zm = z.copy(), z.copy()
        zp[k] += 1e-6
        zm[k] -= 1e-6
        dTdz[k] = (ref_kinetic_energy(model, cm, zp, zd) - ref_kinetic_energy(model, cm, zm, zd)
                   ) / 2e-6
    return ddt - dTdz - ref_generalized_forces(model, cm, t, z, zd)


# ----------------------------------------------------------------------------------------
# kernel-level helpers (these *call* the code under test)
# ----------------------------------------------------------------------------------------


def frame_state(cm, z, zd=None, zdd=None):
    """Run the SR-II position/velocity/acceleration recursions; returns (A, r, u, bcol, Z, Zd)."""
    from workbench.kernels import tree as K
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    Z = np.zeros((nf, 6))
    Zd = np.zeros((nf, 6))
    z = np.asarray(z, dtype=float)
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    if zd is not None:
        K.frame_velocities(ma, np.asarray(zd, float), bcol, Z)
        K.frame_accelerations(ma, np.asarray(zd, float),
                              np.zeros(cm.n) if zdd is None else np.asarray(zdd, float),
                              r, u, bcol, Z, Zd)
    return A, r, u, bcol, Z, Zd


# ----------------------------------------------------------------------------------------
# mechanisms used by several test files
# ----------------------------------------------------------------------------------------


def bind(model, name, value, unit, setter):
    """A test parameter ``name`` (its value and unit) bound by ``setter(name)`` to a
    model field (the setter writes the name where the number was)."""
    model.parameter(name, value, unit, provenance="test")
    setter(name)


def set_item(obj, attr, i):
    """A setter for :func:`bind`: item ``i`` of the tuple attribute ``attr`` of ``obj``."""
    def f(name):
        v = list(getattr(obj, attr))
        v[i] = name
        setattr(obj, attr, tuple(v))
    return f


def catalog_or_none():
    """The shipped-model catalogue if it is importable, else None."""
    try:
        return importlib.import_module("workbench.model.catalog")
    except ImportError:
        return None


def pendulum(theta0=0.0, L=1.0, mass=1.0, gravity=9.81):
    """IFToMM A01: point mass on a massless link of length L, g along -y; the angle is
    measured from the +x axis about +z (theta0 = 0: horizontal release)."""
    m = Model("A01-pendulum", gravity=(0.0, -gravity, 0.0), planar=True,
              provenance="IFToMM A01 planar simple pendulum (benchmarks.md §4)")
    m.body("bob", mass=mass, com=(L, 0.0, 0.0), inertia=(0.0, 0.0, 0.0))
    m.revolute("pivot", GROUND, "bob", axis=(0, 0, 1), q0=theta0)
    return m


def four_bar(a=0.2, b=0.5, c=0.4, d=0.5, theta0=1.0, omega0=2.0, gravity=9.81,
             coupler_guess=None, planar=True):
    """Planar crank-rocker four-bar in the xy plane (uniform bars, 1 kg/m): ground pivots
    O=(0,0) and D=(d,0); crank a, coupler b, rocker c, closed by a cut revolute between
    the coupler tip and the rocker tip.  DOF: crank angle (initial value ``theta0``,
    rate ``omega0``).  Dependent angles are guessed from the exact closed-form
    assembly (circle intersection) unless ``coupler_guess`` is given."""
    m = Model("four-bar", gravity=(0.0, -gravity, 0.0), planar=planar)
    for name, L in (("crank", a), ("coupler", b), ("rocker", c)):
        m.body(name, mass=L, com=(L / 2, 0, 0), inertia=(0, 0, L ** 3 / 12),
               points={"tip": (L, 0, 0)})
    # closed-form assembly for the initial guess (independent of the engine)
    A_ = np.array([a * math.cos(theta0), a * math.sin(theta0)])
    D_ = np.array([d, 0.0])
    dist = np.linalg.norm(D_ - A_)
    if coupler_guess is None and abs(b - c) < dist < b + c:
        ang = math.atan2(*(D_ - A_)[::-1])
        alpha = math.acos((b * b + dist * dist - c * c) / (2 * b * dist))
        phi2 = ang + alpha                          # absolute coupler angle (elbow up)
        B_ = A_ + b * np.array([math.cos(phi2), math.sin(phi2)])
        phi3 = math.atan2(B_[1] - D_[1], B_[0] - D_[0])
        q2, q3 = phi2 - theta0, phi3
    else:
        q2, q3 = coupler_guess if coupler_guess is not None else (0.0, 0.0)
    m.revolute("crank", GROUND, "crank", axis=(0, 0, 1), q0=theta0, qd0=omega0)
    m.revolute("coupler", "crank", "coupler", parent_point="tip", axis=(0, 0, 1), q0=q2)
    m.revolute("rocker", GROUND, "rocker", parent_point=(d, 0, 0), axis=(0, 0, 1), q0=q3)
    m.cut("loop", "revolute", "coupler", "rocker", point1="tip", point2="tip")
    m.dof("crank")
    return m


# IFToMM spatial rigid slider-crank (benchmarks.md §4, data of the EXUDYN example
# `slidercrank3D`): crank AB about global x at A = (0, 0.1, 0.12), conrod BC, slider on
# the global x axis; spherical joint at B, universal joint at C (cross axes: slider x and
# the conrod axis perpendicular to both the rod and the crank plane), g = -9.81 z.
SC_LAB, SC_LBC = 0.08, 0.3
SC_A = np.array([0.0, 0.1, 0.12])


def slider_crank_conrod_frame():
    """Conrod body axes at t = 0 (x along B->C), as in the EXUDYN benchmark script:
    x = (C - B)/|C - B|, z = Gram-Schmidt of B's position vector against x, y = z cross x."""
    B = SC_A + np.array([0.0, 0.0, SC_LAB])
    xC = math.sqrt(SC_LBC ** 2 - B[1] ** 2 - B[2] ** 2)
    C = np.array([xC, 0.0, 0.0])
    ex = (C - B) / SC_LBC
    zt = B - (B @ ex) * ex
    ez = zt / np.linalg.norm(zt)
    ey = np.cross(ez, ex)
    return B, C, np.column_stack([ex, ey, ez])


def slider_crank(omega0=6.0, gravity=9.81, crank_angle0=0.0):
    """IFToMM spatial rigid slider-crank, built from benchmarks.md §4.

    Tree: ground -revolute(x at A)- crank; ground -prismatic(x)- slider;
    slider -universal(slider x, then conrod y)- conrod; loop closed by a cut spherical
    joint between crank tip B and conrod end B.  DOF: crank angle (rate ``omega0``).
    """
    B, C, Rc = slider_crank_conrod_frame()
    m = Model("slider-crank-3d", gravity=(0.0, 0.0, -gravity),
              provenance="IFToMM spatial rigid slider-crank; data: benchmarks.md §4")
    m.body("crank", mass=0.12, com=(0, 0, SC_LAB / 2), inertia=(1e-4, 1e-4, 1e-5),
           points={"B": (0, 0, SC_LAB)})
    # conrod frame origin at C (universal joint), x axis from C to B is -x_body
    m.body("conrod", mass=0.5, com=(-SC_LBC / 2, 0, 0), inertia=(4e-4, 4e-3, 4e-3),
           points={"B": (-SC_LBC, 0, 0), "C": (0, 0, 0)})
    m.body("slider", mass=2.0, com=(0, 0, 0), inertia=(1e-4, 1e-4, 1e-4))
    m.revolute("crank", GROUND, "crank", parent_point=tuple(SC_A), axis=(1, 0, 0),
               q0=crank_angle0, qd0=omega0)
    m.prismatic("slider", GROUND, "slider", axis=(1, 0, 0), q0=C[0])
    m.universal("conrod", "slider", "conrod", axis=(1, 0, 0), axis2=(0, 1, 0),
                orientation=Rc)
    m.cut("B", "spherical", "crank", "conrod", point1="B", point2="B")
    m.dof("crank")
    return m


def n_four_bar(N=4, v0=1.0, gravity=9.81):
    """IFToMM A02 N-four-bar: N+1 vertical cranks of 1 m / 1 kg hinged to ground at
    x = 0..N, their tips joined by N horizontal couplers (1 m, 1 kg), g = -9.81 y;
    initial x-velocity of the first crank's tip B0 = v0.  Uniform bars."""
    m = Model(f"n-four-bar-{N}", gravity=(0.0, -gravity, 0.0), planar=True,
              provenance="IFToMM A02 (benchmarks.md §4), built in the test suite")
    I = 1.0 / 12.0
    for i in range(N + 1):
        m.body(f"crank{i}", mass=1.0, com=(0.5, 0, 0), inertia=(0, 0, I),
               points={"tip": (1.0, 0, 0)})
        # crank pointing up (+y): angle pi/2; tip velocity x = -L * w sin(pi/2) = v0
        m.revolute(f"crank{i}", GROUND, f"crank{i}", parent_point=(float(i), 0, 0),
                   axis=(0, 0, 1), q0=math.pi / 2, qd0=-v0 if i == 0 else 0.0)
    for i in range(N):
        m.body(f"coupler{i}", mass=1.0, com=(0.5, 0, 0), inertia=(0, 0, I),
               points={"tip": (1.0, 0, 0)})
        m.revolute(f"coupler{i}", f"crank{i}", f"coupler{i}", parent_point="tip",
                   axis=(0, 0, 1), q0=-math.pi / 2)
        m.cut(f"loop{i}", "revolute", f"coupler{i}", f"crank{i + 1}", point1="tip",
              point2="tip")
    m.dof("crank0")
    return m


def pinned_rod(m=2.0, L=0.8, g=9.81):
    """A uniform rod (mass ``m``, length ``L``: parameters of those names) on two massless
    carriers (prismatic x, prismatic y) and a revolute, pinned to ground at its end by a cut
    revolute ``pin``: one degree of freedom, and the cut's multipliers are the pivot's
    reaction force (body2 = ground)."""
    mod = Model("pinned-rod", gravity=(0, -g, 0), planar=True)
    mod.parameter("m", m, "kg")
    mod.parameter("L", L, "m")
    mod.body("cx", mass=0.0)
    mod.body("cy", mass=0.0)
    mod.body("rod", mass={"param": "m"}, com=({"param": "L", "scale": 0.5}, 0, 0),
             inertia=(0, 0, m * L * L / 12), points={"O": (0, 0, 0)})
    mod.prismatic("sx", GROUND, "cx", axis=(1, 0, 0))
    mod.prismatic("sy", "cx", "cy", axis=(0, 1, 0))
    mod.revolute("pivot", "cy", "rod", axis=(0, 0, 1))
    mod.cut("pin", "revolute", "rod", GROUND, point1="O", point2=(0, 0, 0),
            axis1=(0, 0, 1), axis2=(0, 0, 1))
    mod.dof("pivot")
    return mod
