"""Models of the RCR study (seed 004): the reconstruction of the seed's planar five-bar
(§6, :func:`five_bar`), the same five-bar re-topologised with a fictitious joint for its GCL
run (§5, :func:`five_bar_gcl`), and ladders for the scaling study (:func:`ladder`).

The seed gives only: joints q1, q2, q3 revolute, q4, q5 telescoping prismatic; thin rods of
unit length and mass; a vertical plane; released from rest at
``q = (pi/4, pi/2, -pi/2, 0, 0)``; plain RCR with the trailing dependents (q3, q4, q5)
breaks down, ACS with dependents (q2, q3, q5) runs (shared/notes/seeds-003-004.md §2.11).
Joint placement, prismatic directions and the ground link are missing.  Our
**reconstruction** (:func:`five_bar`):

* the loop is the seed's opened chain ``ground -q1- rod1 -q2- rod2 -q3- rod3 -q4- rod4 -q5-
  phantom``, closed by a planar weld (cut ``"fixed"``: 3 equations) of the massless phantom
  to the ground, which is the seed's phantom body (a massless copy of the base joined by
  the last joint ``q5``);
* rods 1-3 turn about z at the tip of the previous rod (rod 1 at the origin); the angles
  are relative (zero: straight on), except that rod 3 is mounted at +pi/3 to the
  continuation of rod 2.  With straight mounting, rods 2 and 3 are perpendicular at the
  release configuration (q3 = -pi/2), where the seed's ACS set (q2, q3, q5) is singular
  too (``q2 - q3`` then translates rod 3 along the slide direction);
* ``q4`` telescopes rod 4 out of the tip of rod 3 along rod 3's axis, ``q5`` slides the
  phantom out of the tip of rod 4 along the same axis (telescoping: both along the rods),
  so the two prismatic columns are always equal and every dependent set containing both
  (the trailing set q3, q4, q5) is singular: the seed's breakdown;
* rods: 1 m, 1 kg, centre of mass at mid-length, ``Izz = m L^2 / 12``; gravity 9.81 m/s^2
  along -y (not given in the seed); released from rest; degrees of freedom (q1, q4) for the
  Matrix-R reference (the seed's ACS independents).
"""

from __future__ import annotations

import math

import numpy as np

from workbench.errors import OptionError
from workbench.model.builder import Model
from workbench.model.elements import GROUND

#: the seed's release configuration (q1 .. q5)
FIVE_BAR_Q0 = (math.pi / 4, math.pi / 2, -math.pi / 2, 0.0, 0.0)
#: the mounting angle of rod 3 on the joint q3 (our reconstruction, see the module text)
ROD3_MOUNT = math.pi / 3


def _rz(a):
    c, s = math.cos(a), math.sin(a)
    return [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]


def five_bar(q0=FIVE_BAR_Q0, gravity=9.81) -> Model:
    """The reconstructed seed-004 five-bar (planar; coordinates q1 .. q5, dof q1, q4)."""
    return _five_bar(q0, gravity, fictitious=False)


def five_bar_gcl(q0=FIVE_BAR_Q0, gravity=9.81) -> Model:
    """The same five-bar re-topologised for GCL (seed 004 §5; our construction of its
    Fig. 8.a, which is missing from the text): a **fictitious** planar joint
    ``F = (Fx, Fy, Fr)`` (two slides and a turn, through two massless bodies) carries a
    massless body ``X`` from the tip of rod 3; ``X`` is welded to rod 4 (cut ``"fict"``, 3
    equations) and the phantom slides (``q5``) out of ``X`` instead of rod 4.  ``X`` moves
    as rod 4 and ``F`` adds 3 coordinates and 3 equations, so the motion is the five-bar's.

    Two coupled loops on **different bases** (seed 004 eqs 103-111): ``"fict"`` (rod 3 -q4-
    rod 4 = X -F- rod 3, base rod 3) and ``"weld"`` (ground -q1 q2 q3- rod 3 -F- X -q5-
    phantom = ground, base ground), sharing the fictitious frames.  With the degrees of
    freedom (q1, q4) the dependents are ``F`` in ``"fict"`` (after q4) and the seed's
    (q2, q3, q5) in ``"weld"`` (after q1, around the shared ``F``): the singular pair
    (q4, q5) of the plain loop is split between the two loops."""
    return _five_bar(q0, gravity, fictitious=True)


def _five_bar(q0, gravity, fictitious):
    what = "with a fictitious joint (GCL), " if fictitious else ""
    m = Model("rcr-five-bar-gcl" if fictitious else "rcr-five-bar",
              gravity=(0.0, -gravity, 0.0), planar=True,
              provenance=f"seed 004 §5 planar five-bar {what}RECONSTRUCTION "
                         "(workbench/formulations/rcr/models.py)")
    I = 1.0 / 12.0
    for i in range(1, 5):
        m.body(f"rod{i}", mass=1.0, com=(0.5, 0.0, 0.0), inertia=(0.0, 0.0, I),
               points={"tip": (1.0, 0.0, 0.0)},
               provenance="seed 004 §6: thin rod of unit length (m) and mass (kg); centre of "
                          "mass at mid-length and Izz = m L^2 / 12 derived (thin rod)")
    m.body("phantom", mass=0.0, com=(0.0, 0.0, 0.0), inertia=(0.0, 0.0, 0.0),
           provenance="seed 004 §3: the massless phantom body of the opened loop")
    if fictitious:
        for b in ("fx1", "fx2", "X"):
            m.body(b, mass=0.0, com=(0.0, 0.0, 0.0), inertia=(0.0, 0.0, 0.0),
                   points={"tip": (1.0, 0.0, 0.0)},
                   provenance="seed 004 §5: massless body of the fictitious joint (GCL); our "
                              "construction of the missing Fig. 8.a")
    seed = "seed 004 §6: joint type and release value; "
    recon = "placement RECONSTRUCTION (the seed's Fig. 6 is missing; models.py)"
    m.revolute("q1", GROUND, "rod1", axis=(0, 0, 1), q0=q0[0], provenance=seed + recon)
    m.revolute("q2", "rod1", "rod2", parent_point="tip", axis=(0, 0, 1), q0=q0[1],
               provenance=seed + recon)
    m.revolute("q3", "rod2", "rod3", parent_point="tip", axis=(0, 0, 1), q0=q0[2],
               orientation=_rz(ROD3_MOUNT),
               provenance=seed + recon + "; rod 3 mounted at +pi/3 (ours)")
    m.prismatic("q4", "rod3", "rod4", parent_point="tip", axis=(1, 0, 0), q0=q0[3],
                provenance=seed + "telescoping along rod 3 (" + recon + ")")
    if fictitious:
        fict = "fictitious joint of GCL (seed 004 §5), our construction"
        m.prismatic("Fx", "rod3", "fx1", parent_point="tip", axis=(1, 0, 0), q0=q0[3],
                    provenance=fict)
        m.prismatic("Fy", "fx1", "fx2", axis=(0, 1, 0), q0=0.0, provenance=fict)
        m.revolute("Fr", "fx2", "X", axis=(0, 0, 1), q0=0.0, provenance=fict)
        m.cut("fict", "fixed", "rod4", "X", axis1=(1.0, 0.0, 0.0), axis2=(1.0, 0.0, 0.0),
              provenance=fict + ": X welded to rod 4")
    m.prismatic("q5", "X" if fictitious else "rod4", "phantom", parent_point="tip",
                axis=(1, 0, 0), q0=q0[4], provenance=seed + "telescoping along rod 4 (" + recon
                + ")")
    # the phantom's place and direction at the release configuration: the weld
    a = np.cumsum([q0[0], q0[1], q0[2] + ROD3_MOUNT])
    x = np.zeros(2)
    for k in range(3):
        x += (1.0 + (q0[3] + 1.0 + q0[4] if k == 2 else 0.0)) * np.array(
            [math.cos(a[k]), math.sin(a[k])])
    d = (math.cos(a[2]), math.sin(a[2]), 0.0)
    m.cut("weld", "fixed", "phantom", GROUND, point1=(0.0, 0.0, 0.0),
          point2=(float(x[0]), float(x[1]), 0.0), axis1=(1.0, 0.0, 0.0), axis2=d,
          provenance="seed 004 §3: the phantom closes the loop at the base; its place is the "
                     "release configuration's (derived)")
    m.dof("q1", "q4")
    return m



def ladder(cells: int, height: float = 0.3, width: float = 0.4, tree: str = "rung") -> Model:
    """A planar **ladder** of ``cells`` four-bar cells (a lattice tower; a benchmark model of
    the scaling study, not a physical reference): left rails ``L1 .. LN`` and right rails
    ``R1 .. RN`` of length ``height``, rungs ``rung1 .. rungN`` of length ``width``,
    revolute joints at every corner, a spring-damper on every left-rail joint (rest angle
    0.1 rad off the released, rectangular configuration: the tower sways), gravity -y.
    ``3 N`` coordinates, ``2 N`` closure equations, ``N`` degrees of freedom (the left-rail
    angles ``l1 .. lN``).

    ``tree="rung"`` (default): the spanning tree makes every cell a loop **based on the rung
    below it**: ``L(k+1)`` hangs from the left end of ``rung(k)`` (not from ``L(k)``: the
    same pin), ``rung(k)``
    from the top of ``L(k)``, ``R(k)`` from the right end of ``rung(k)``, and the cut joins
    the foot of ``R(k)`` to the right end of ``rung(k-1)`` (the ground for the first cell).
    The loops then share no frame: each is a group nested in the one below (seed 004's
    re-topologising of coupled loops, eqs 103-111, done by the choice of tree), with the
    trailing dependents (rung, right rail) and the chain ``l(k)``.

    ``tree="ground"``: the same mechanism with the tree of two rails standing on the ground
    (``L(k+1)`` on ``L(k)``, ``R(k+1)`` on ``R(k)``, ``rung(k)`` on ``L(k)``, cut at the
    right end of the rung): every cell's loop runs through the ground and is coupled to all
    the loops below it (one group, every left-rail angle an outboard independent)."""
    if tree not in ("rung", "ground"):
        raise OptionError(f"ladder: tree {tree!r} is not 'rung' or 'ground'")
    if int(cells) != cells or cells < 1:
        raise OptionError(f"ladder: cells must be a whole number >= 1, got {cells!r}")
    m = Model(f"ladder-{cells}" + ("-ground" if tree == "ground" else ""), gravity=(0.0, -9.81, 0.0), planar=True,
              provenance="benchmark model of the RCR scaling study "
                         "(workbench/formulations/rcr/models.py)")
    half = math.pi / 2
    for k in range(1, cells + 1):
        for b, length in ((f"L{k}", height), (f"rung{k}", width), (f"R{k}", height)):
            m.body(b, mass=length, com=(0.5 * length, 0.0, 0.0),
                   inertia=(0.0, 0.0, length ** 3 / 12.0), points={"tip": (length, 0.0, 0.0)})
        if k == 1:
            m.revolute("l1", GROUND, "L1", axis=(0, 0, 1), q0=half)
        elif tree == "rung":
            m.revolute(f"l{k}", f"rung{k - 1}", f"L{k}", axis=(0, 0, 1), q0=half)
        else:
            m.revolute(f"l{k}", f"L{k - 1}", f"L{k}", parent_point="tip", axis=(0, 0, 1),
                       q0=0.0)
        m.joint_spring(f"s{k}", f"l{k}", k=40.0, c=0.5,
                       q0=(half if k == 1 or tree == "rung" else 0.0) - 0.1)
        m.revolute(f"u{k}", f"L{k}", f"rung{k}", parent_point="tip", axis=(0, 0, 1), q0=-half)
        if tree == "rung":
            m.revolute(f"r{k}", f"rung{k}", f"R{k}", parent_point="tip", axis=(0, 0, 1),
                       q0=-half)
            m.cut(f"c{k}", "revolute", f"R{k}", GROUND if k == 1 else f"rung{k - 1}",
                  point1=(height, 0.0, 0.0), point2=(width, 0.0, 0.0))
        else:
            if k == 1:
                m.revolute("r1", GROUND, "R1", parent_point=(width, 0.0, 0.0),
                           axis=(0, 0, 1), q0=half)
            else:
                m.revolute(f"r{k}", f"R{k - 1}", f"R{k}", parent_point="tip",
                           axis=(0, 0, 1), q0=0.0)
            m.cut(f"c{k}", "revolute", f"rung{k}", f"R{k}", point1=(width, 0.0, 0.0),
                  point2=(height, 0.0, 0.0))
    m.dof(*[f"l{k}" for k in range(1, cells + 1)])
    return m
