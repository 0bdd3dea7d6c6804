"""The compiled, immutable array form of a model, as handed to the numba kernels.

:class:`ModelArrays` is a named tuple of flat numpy arrays.  All numeric data that can be
bound to a design parameter live in the *field vector* ``p`` and are read through index
arrays, so a parameter change is a change of ``p`` only and derivatives with respect to
parameters are derivatives with respect to entries of ``p``.
"""

from __future__ import annotations

from collections import namedtuple

# frame (tree node) types
FIXED, REVOLUTE, PRISMATIC = 0, 1, 2
# primitive constraint equation types
C_PTCOMP, C_DOTVV, C_DOTVP, C_DIST, C_DRIVE = 0, 1, 2, 3, 4
# degree-of-freedom kinds
DOF_COORD, DOF_POINT = 0, 1
# time-function kinds
TF_CONST, TF_POLY, TF_SINE, TF_SMOOTHSTEP, TF_STEPS = 0, 1, 2, 3, 4
# applied load kinds
AF_FORCE, AF_TORQUE = 0, 1

ModelArrays = namedtuple(
    "ModelArrays",
    [
        "p",            # float[nfield]: numeric fields (geometry, inertia, force data)
        "gravity",      # float[3]
        "planar",       # int: 1 for planar models
        # frames (tree nodes); parents come before children
        "fr_parent", "fr_type", "fr_coord", "fr_off", "fr_axis", "fr_C",
        "fr_body",      # int[nf]: body attached to the frame or -1
        # bodies
        "b_frame", "b_org", "b_mass", "b_com", "b_inr",
        # points (body -1 = ground, coordinates in the body frame) and unit vectors
        "pt_body", "pt_fld", "vc_body", "vc_val",
        # primitive constraint equations
        "c_type", "c_i", "c_fld",
        # degrees of freedom
        "dof_type", "dof_i",
        # point-to-point spring-dampers
        "sp_pt", "sp_k", "sp_c", "sp_L0",
        # joint spring-dampers
        "js_coord", "js_k", "js_c", "js_z0",
        # applied forces / torques
        "af_type", "af_idx", "af_dir", "af_tf",
        # time functions
        "tf_kind", "tf_par",
        # tire-ground contacts (workbench/_tire.py): wheel-centre point, spin-axis vector,
        # first of the TY_NPAR consecutive parameter fields in p
        "ty_pt", "ty_vc", "ty_par",
        # road: (first field, number of fields) of the road array in p (length 0: flat z=0)
        "rd_fld",
    ],
)
