"""Loop detection, opening and the choice of dependent coordinates for RCR (seed 004 §2.5:
"loop detection and opening", done once per model in Python): the flat arrays
:data:`workbench.formulations.rcr.loops.LoopStructure` that the kernels of
:mod:`workbench.formulations.rcr.loops` run on.

* **Loops.**  The constraint rows are grouped by the pair of frames they connect (the rows
  of one cut joint; a cam row is refused).  A drive row ``z_c - f(t) = 0`` makes ``c`` a
  prescribed coordinate (``coord_drive``): no candidate for a dependent, ``ST_PRESCRIBED``
  in a loop list (or ``ST_CHAIN`` on the chain).  Side A is the frame of the first row's
  first point or vector.  The loop base is the nearest common ancestor of the two frames
  (ground: -1), the loop list the path ``base -> F_A`` outwards then ``F_B -> base``
  inwards.
* **Rank.**  ``m_i`` is the numerical rank of the loop's closure Jacobian at the given
  configuration (singular values above ``rank_tol`` times the largest): a planar loop in
  3-D closed by a spatial cut has redundant rows.
* **Dependents.**  By default the trailing ``m_i`` of each loop list (plain RCR).
  ``"reverse"``: the same, with a loop whose trailing set is singular at the given
  configuration walked the other way (sides A and B swapped), the loop-reversal fallback
  of GCL.  Given
  ``dependents`` (names or indices), each loop takes those of its coordinates not taken by
  another loop; there must be exactly ``m_i`` (ACS).  Loops coupled through given
  coordinates (GCL) share them out: a loop left with exactly ``m_i`` takes them first, a
  loop with more takes, from the end of its list, those passing the pivot test.
  ``"auto"``: greedily from the end of each list, the coordinates whose columns pass the
  pivot test (a selection at set-up).  ``"pivoted"``: column-pivoted Gram-Schmidt, the
  largest relative remaining column first (the re-selection when a run's pivot degrades,
  :meth:`workbench.formulations.rcr.LoopSolver.simulate_rk4`).
* **Groups.**  Loops sharing a coordinate or a frame form a group, eliminated loop after
  loop (a loop after those whose dependents it uses).  Coupled loops may have different
  bases (GCL, seed 004 eqs 103-111): the group's base is the one that is an ancestor of the
  others, and each loop keeps its list from its own base.
* **Chain.**  The start of the first loop's side-A path whose coordinates are independent
  and belong to no other loop, cut before a frame with another loop frame as child; every
  other independent of the group is an outboard (ACS) independent.
"""

from __future__ import annotations

import numpy as np

from workbench.errors import OptionError
from workbench.formulations.rcr import loops as RL
from workbench.kernels import layout as AR
from workbench.kernels import tree as K


def _entity_frames(ma, k):
    typ = int(ma.c_type[k])
    ci = ma.c_i[k]

    def pf(i):
        b = int(ma.pt_body[i])
        return int(ma.b_frame[b]) if b >= 0 else -1

    def vf(i):
        b = int(ma.vc_body[i])
        return int(ma.b_frame[b]) if b >= 0 else -1

    if typ == AR.C_PTCOMP:
        return [pf(ci[0]), pf(ci[1])]
    if typ == AR.C_DOTVV:
        return [vf(ci[0]), vf(ci[1])]
    if typ == AR.C_DOTVP:
        return [vf(ci[0]), pf(ci[1]), pf(ci[2])]
    if typ == AR.C_DIST:
        return [pf(ci[0]), pf(ci[1])]
    return None


def _path(parent, base, f):
    """Frames from ``base`` (excluded) to ``f`` (included), outwards."""
    out = []
    while f != base:
        out.append(f)
        f = int(parent[f])
    return out[::-1]


def _ancestors(parent, f):
    out = [f]
    while f >= 0:
        f = int(parent[f])
        out.append(f)
    return out


def _common_ancestor(parent, fa, fb):
    """The nearest common ancestor of frames ``fa`` and ``fb`` (either may be it; -1 the
    ground): the base of the loop they close."""
    anc = set(_ancestors(parent, fa))
    base = fb
    while base not in anc:
        base = int(parent[base])
    return base


def loop_structure(cm, z, dependents=None, rank_tol=1e-9, pivot_tol=1e-10):
    """The :data:`~workbench.formulations.rcr.loops.LoopStructure` of the compiled model
    ``cm`` at the configuration ``z`` (used for the ranks ``m_i`` only).

    ``dependents``: ``None`` (the trailing ``m_i`` coordinates of every loop, plain RCR),
    ``"reverse"`` (plain RCR, with every loop whose trailing set fails the pivot test at
    ``z`` worked in the opposite direction: the GCL fallback; loops closing onto their own
    base cannot be reversed),
    ``"auto"`` (from the end of each loop list, every coordinate whose closure column is
    independent of those kept so far, relative pivot above ``pivot_tol``: the trailing set
    when it is valid at ``z``, otherwise an ACS set), ``"pivoted"`` (column-pivoted
    Gram-Schmidt: each next dependent the coordinate whose column keeps the largest
    relative part orthogonal to those kept; the re-selection during a run) or coordinate
    names / indices (ACS).
    Raises :class:`~workbench.errors.OptionError` for a closure this implementation does not
    handle (cam rows, a row across three frames, rods with mass, coupled loops none of
    whose bases is an ancestor of the others, a dependent choice that does not fit)."""
    ma = cm.arrays
    parent = np.asarray(ma.fr_parent)
    fr_coord = np.asarray(ma.fr_coord)
    nf = parent.shape[0]
    n = cm.n
    m = int(ma.c_type.shape[0])
    names = cm.coord_names
    cnames = getattr(cm, "constraint_names", ())

    def rowname(k):
        return cnames[k] if k < len(cnames) else f"row {k}"

    if ma.rd_pt.shape[0] > 0:
        raise OptionError(f"rcr: model {cm.name!r} has rods with mass (seed 002 rod "
                          "elements); RCR does not carry their inertia")
    # -- loops: rows grouped by frame pair ----------------------------------------------
    groups = {}
    order = []
    drive = {}
    for k in range(m):
        if int(ma.c_type[k]) == AR.C_DRIVE:
            # a driven (prescribed) coordinate: known z, zd, zdd, no unknown of any problem
            c = int(ma.c_i[k, 0])
            if c in drive:
                raise OptionError(f"rcr: model {cm.name!r}: coordinate {names[c]!r} has two "
                                  "drives")
            drive[c] = k
            continue
        fr = _entity_frames(ma, k)
        if fr is None:
            raise OptionError(f"rcr: model {cm.name!r}: constraint {rowname(k)!r} is a cam "
                              "relation; RCR handles cut-joint closures and drives only")
        s = sorted(set(fr))
        if len(s) != 2:
            raise OptionError(f"rcr: model {cm.name!r}: constraint {rowname(k)!r} connects "
                              f"{len(s)} frames; RCR needs exactly two per loop closure")
        key = tuple(s)
        if key not in groups:
            groups[key] = {"rows": [], "fa": fr[0], "fb": s[1] if s[0] == fr[0] else s[0]}
            order.append(key)
        groups[key]["rows"].append(k)
    # -- geometry for the ranks ----------------------------------------------------------
    z = np.ascontiguousarray(z, dtype=float)
    A = np.zeros((nf, 3, 3))
    r = np.zeros((nf, 3))
    u = np.zeros((nf, 3))
    bcol = np.zeros((nf, 6))
    K.frame_positions(ma, ma.p, z, A, r, u)
    K.joint_columns(ma, r, u, bcol)
    Jc = np.zeros((m, n))
    if m:
        K.constraint_jacobian(ma, ma.p, A, r, bcol, n, Jc)
    loops = []
    for key in order:
        gr = groups[key]
        fa, fb = gr["fa"], gr["fb"]
        base = _common_ancestor(parent, fa, fb)
        pa = _path(parent, base, fa)
        pb = _path(parent, base, fb)
        items = [(f, 0) for f in pa] + [(f, 1) for f in pb[::-1]]
        allc = [(int(fr_coord[f]), f, s) for f, s in items if fr_coord[f] >= 0]
        # the driven coordinates are no candidates for dependents ("coords" during the
        # selection; "allc" keeps them for the loop list)
        coords = [x for x in allc if x[0] not in drive]
        cols = [c for c, _, _ in coords]
        sub = Jc[np.ix_(gr["rows"], cols)] if cols else np.zeros((len(gr["rows"]), 0))
        sv = np.linalg.svd(sub, compute_uv=False) if sub.size else np.zeros(0)
        rank = int((sv > rank_tol * sv.max()).sum()) if sv.size and sv.max() > 0 else 0
        loops.append(dict(rows=gr["rows"], fa=fa, fb=fb, base=base, pa=pa, pb=pb,
                          frames=set(pa) | set(pb), coords=coords, allc=allc, rank=rank))
    # -- dependents ------------------------------------------------------------------------
    def from_end(lo, cands):
        # from the end of ``cands`` (in list order), keep a coordinate when its column is
        # independent of the columns kept so far (Gram-Schmidt, the pivot test of eq 34),
        # up to the loop's rank; returned in list order
        basis, keep = [], []
        for c in reversed(cands):
            if len(keep) == lo["rank"]:
                break
            a = Jc[lo["rows"], c].copy()
            aa = float(a @ a)
            for q in basis:
                a -= (q @ a) * q
            if aa > 0.0 and float(a @ a) > pivot_tol * aa:
                basis.append(a / np.linalg.norm(a))
                keep.append(c)
        return [c for c in cands if c in set(keep)]

    def valid(lo, cols):
        # the pivot test of eq 34 on the columns ``cols`` of loop ``lo``, taken from the
        # last (Gram-Schmidt)
        basis = []
        for c in reversed(cols):
            a = Jc[lo["rows"], c].copy()
            aa = float(a @ a)
            for q in basis:
                a -= (q @ a) * q
            if not (aa > 0.0 and float(a @ a) > pivot_tol * aa):
                return False
            basis.append(a / np.linalg.norm(a))
        return True

    if isinstance(dependents, str) and dependents == "reverse":
        # the loop-reversal fallback of GCL (seed 004 §"General coupled loops"): a loop whose
        # trailing m_i coordinates are not a valid dependent set is worked in the opposite
        # direction (sides A and B swapped: the list runs base -> F_B, F_A -> base), whose
        # trailing m_i are its first coordinates; its independents then form the chain on
        # the other branch (recursive scalar pivots, no dense ACS solve)
        taken = {}
        for i, lo in enumerate(loops):
            cols = [c for c, _, _ in lo["coords"]]
            own = cols[len(cols) - lo["rank"]:]
            if not valid(lo, own) or any(c in taken for c in own):
                if lo["fb"] == lo["base"]:
                    raise OptionError(
                        f"rcr: model {cm.name!r}: the trailing dependents "
                        f"{[names[c] for c in own]} of the loop closed by "
                        f"{rowname(lo['rows'][0])!r} are not valid, and the loop cannot be "
                        "reversed (it closes onto its own base: reversing it would re-root the "
                        "tree); use dependents='auto' (ACS)")
                pa = _path(parent, lo["base"], lo["fb"])
                pb = _path(parent, lo["base"], lo["fa"])
                items = [(f, 0) for f in pa] + [(f, 1) for f in pb[::-1]]
                allc = [(int(fr_coord[f]), f, s_) for f, s_ in items if fr_coord[f] >= 0]
                coords = [x for x in allc if x[0] not in drive]
                cols = [c for c, _, _ in coords]
                own = cols[len(cols) - lo["rank"]:]
                if not valid(lo, own) or any(c in taken for c in own):
                    raise OptionError(
                        f"rcr: model {cm.name!r}: the loop closed by "
                        f"{rowname(lo['rows'][0])!r} has no valid trailing dependents in "
                        "either direction at this configuration; use dependents='auto' "
                        "(ACS) or add fictitious joints to the model (GCL, docs/rcr.md)")
                lo.update(fa=lo["fb"], fb=lo["fa"], pa=pa, pb=pb, coords=coords, allc=allc,
                          reversed=True)
            for c in own:
                taken[c] = i
            lo["own"] = own
    elif isinstance(dependents, str) and dependents == "pivoted":
        # column-pivoted Gram-Schmidt over each loop's coordinates not taken by an earlier
        # loop: the coordinate whose closure column keeps the largest part orthogonal to
        # the columns kept so far (relative to its length) next; the best-conditioned set
        # a greedy choice gives (the re-selection of a run whose pivot degrades,
        # LoopSolver.simulate_rk4)
        taken = {}
        for i, lo in enumerate(loops):
            basis = []
            own = []
            cand = [c for c, _, _ in lo["coords"] if c not in taken]
            while len(own) < lo["rank"]:
                best, bestc, bestv = -1.0, -1, None
                for c in cand:
                    if c in own:
                        continue
                    a = Jc[lo["rows"], c].copy()
                    aa = float(a @ a)
                    if aa == 0.0:
                        continue
                    for q in basis:
                        a -= (q @ a) * q
                    rel = float(a @ a) / aa
                    if rel > best:
                        best, bestc, bestv = rel, c, a
                if bestc < 0 or best <= pivot_tol:
                    raise OptionError(
                        f"rcr: model {cm.name!r}: no valid set of {lo['rank']} dependent "
                        f"coordinates in the loop closed by {rowname(lo['rows'][0])!r} at "
                        "this configuration")
                basis.append(bestv / np.linalg.norm(bestv))
                own.append(bestc)
            own = [c for c, _, _ in lo["coords"] if c in set(own)]
            for c in own:
                taken[c] = i
            lo["own"] = own
    elif isinstance(dependents, str) and dependents == "auto":
        # from the end of each loop list, keep a coordinate when its column is independent
        # of the columns kept so far (Gram-Schmidt, the pivot test of eq 34): the trailing
        # set when it is valid, otherwise the nearest valid ACS set
        taken = {}
        for i, lo in enumerate(loops):
            own = from_end(lo, [c for c, _, _ in lo["coords"] if c not in taken])
            if len(own) != lo["rank"]:
                raise OptionError(
                    f"rcr: model {cm.name!r}: no valid set of {lo['rank']} dependent "
                    f"coordinates in the loop closed by {rowname(lo['rows'][0])!r} at this "
                    "configuration")
            for c in own:
                taken[c] = i
            lo["own"] = own
    elif dependents is None:
        taken = {}
        for i, lo in enumerate(loops):
            own = [c for c, _, _ in lo["coords"]][len(lo["coords"]) - lo["rank"]:]
            for c in own:
                if c in taken:
                    raise OptionError(
                        f"rcr: model {cm.name!r}: coordinate {names[c]!r} is a trailing "
                        "dependent of two loops; give the dependent coordinates explicitly")
                taken[c] = i
            lo["own"] = own
    else:
        dep = set()
        for d in dependents:
            dep.add(cm.coordinate(d) if isinstance(d, str) else int(d))
        if dep & set(drive):
            raise OptionError(f"rcr: model {cm.name!r}: the driven coordinates "
                              f"{sorted(names[c] for c in dep & set(drive))} cannot be "
                              "dependents (their motion is prescribed)")
        taken = {}

        def avail(lo):
            return [c for c, _, _ in lo["coords"] if c in dep and c not in taken]

        pending = list(range(len(loops)))
        while pending:
            # coupled loops (GCL) share given coordinates: a loop whose available ones are
            # exactly its rank takes them first; a loop with more takes, from the end of
            # its list, those whose columns pass the pivot test and leaves the rest to the
            # loops after it
            forced = [i for i in pending if len(avail(loops[i])) == loops[i]["rank"]]
            i = forced[0] if forced else pending[0]
            pending.remove(i)
            lo = loops[i]
            own = avail(lo)
            if len(own) > lo["rank"]:
                own = from_end(lo, own)
            if len(own) != lo["rank"]:
                raise OptionError(
                    f"rcr: model {cm.name!r}: the loop closed by {rowname(lo['rows'][0])!r} "
                    f"needs {lo['rank']} dependent coordinates (the rank of its closure), "
                    f"the choice gives {[names[c] for c in own]}")
            for c in own:
                taken[c] = i
            lo["own"] = own
        extra = dep - set(taken)
        if extra:
            raise OptionError(f"rcr: model {cm.name!r}: dependent coordinates "
                              f"{sorted(names[c] for c in extra)} belong to no loop")
    depof = {}
    for i, lo in enumerate(loops):
        lo["coords"] = lo.pop("allc")
        for c in lo["own"]:
            depof[c] = i
    # -- groups: loops sharing coordinates or frames (union-find) ------------------------
    nl = len(loops)
    root = list(range(nl))

    def find(i):
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    owner = {}
    for i, lo in enumerate(loops):
        for f in lo["frames"]:
            if f in owner:
                root[find(i)] = find(owner[f])
            else:
                owner[f] = i
    members = {}
    for i in range(nl):
        members.setdefault(find(i), []).append(i)
    glist = []
    for key in sorted(members, key=lambda k: min(members[k])):
        mem = members[key]
        # the group's base: the loop base that is an ancestor of (or equal to) every other
        # (coupled loops on different bases, seed 004 eqs 103-111: every frame of the
        # group is then reached from it through frames of the group)
        bases = {loops[i]["base"] for i in mem}
        top = [b for b in bases
               if all(b == -1 or b in _ancestors(parent, o) for o in bases)]
        if not top:
            raise OptionError(
                f"rcr: model {cm.name!r}: coupled loops "
                f"{[rowname(loops[i]['rows'][0]) for i in mem]} share coordinates but none "
                "of their bases is an ancestor of the others")
        gbase = top[0]
        # elimination order: a loop after the loops whose dependents it uses (Kahn)
        need = {i: {depof[c] for c, _, _ in loops[i]["coords"]
                    if c in depof and depof[c] != i} for i in mem}
        ordered = []
        ready = sorted(i for i in mem if not need[i])
        while ready:
            i = ready.pop(0)
            ordered.append(i)
            for j in mem:
                if i in need[j]:
                    need[j].discard(i)
                    if not need[j] and j not in ordered and j not in ready:
                        ready.append(j)
            ready.sort()
        if len(ordered) != len(mem):
            raise OptionError(
                f"rcr: model {cm.name!r}: the dependents of the coupled loops "
                f"{[rowname(loops[i]['rows'][0]) for i in mem]} cannot be eliminated loop "
                "after loop (each uses another's dependents); choose other dependents")
        glist.append((gbase, ordered))
    # -- chains, lumped frames, outboard independents ------------------------------------
    fr_role = np.zeros(nf, dtype=np.int64)
    coord_xi = -np.ones(n, dtype=np.int64)
    g_base, g_chain, g_lump, g_xi = [], [], [], []
    g_chain_ptr, g_lump_ptr, g_xi_ptr, g_loop_ptr = [0], [0], [0], [0]
    l_fa, l_chain, l_row, l_row_ptr = [], [], [], [0]
    lc_coord, lc_frame, lc_side, lc_status, l_coord_ptr = [], [], [], [], [0]
    for base, ordered in glist:
        frames = set().union(*(loops[i]["frames"] for i in ordered))
        coord_loops = {}
        for i in ordered:
            for c, _, _ in loops[i]["coords"]:
                coord_loops.setdefault(c, set()).add(i)
        first = next(loops[i] for i in ordered if loops[i]["base"] == base)
        children = {}
        for h in frames:
            children.setdefault(int(parent[h]), []).append(h)
        chain = []
        for f in first["pa"]:
            c = int(fr_coord[f])
            if c >= 0 and (c in depof or len(coord_loops[c]) > 1):
                break
            chain.append(f)
            kids = children.get(f, [])
            nxt = first["pa"][len(chain)] if len(chain) < len(first["pa"]) else None
            if any(h != nxt for h in kids):
                break
        while chain and fr_coord[chain[-1]] < 0:
            chain.pop()
        chainset = set(chain)
        lump = sorted(frames - chainset)
        chain_coords = {int(fr_coord[f]) for f in chain if fr_coord[f] >= 0}
        indep = sorted(c for c in coord_loops
                       if c not in depof and c not in chain_coords and c not in drive)
        for f in chain:
            fr_role[f] = RL.ROLE_CHAIN
        for f in lump:
            fr_role[f] = RL.ROLE_LUMP
        for q, c in enumerate(indep):
            coord_xi[c] = q
        g_base.append(base)
        g_chain += chain
        g_chain_ptr.append(len(g_chain))
        g_lump += lump
        g_lump_ptr.append(len(g_lump))
        g_xi += indep
        g_xi_ptr.append(len(g_xi))
        for i in ordered:
            lo = loops[i]
            l_fa.append(lo["fa"])
            has_chain = bool(chain_coords) and chain_coords <= {c for c, _, _ in lo["coords"]}
            l_chain.append(1 if has_chain else 0)
            l_row += lo["rows"]
            l_row_ptr.append(len(l_row))
            own = set(lo["own"])
            for c, f, s in lo["coords"]:
                lc_coord.append(c)
                lc_frame.append(f)
                lc_side.append(s)
                if c in chain_coords:
                    st = RL.ST_CHAIN
                elif c in drive:
                    st = RL.ST_PRESCRIBED
                elif c in own:
                    st = RL.ST_OWN
                elif c in depof:
                    st = RL.ST_EARLIER
                else:
                    st = RL.ST_OUTBOARD
                lc_status.append(st)
            l_coord_ptr.append(len(lc_coord))
        g_loop_ptr.append(len(l_fa))
    ng = len(g_base)
    bases = np.asarray(g_base, dtype=np.int64)
    fb_grp = np.argsort(bases, kind="stable").astype(np.int64)
    counts = np.bincount(bases + 1, minlength=nf + 1) if ng else np.zeros(nf + 1, np.int64)
    fb_ptr = np.zeros(nf + 2, dtype=np.int64)
    fb_ptr[1:] = np.cumsum(counts)

    def i64(x):
        return np.asarray(x, dtype=np.int64)

    coord_drive = -np.ones(n, dtype=np.int64)
    for c, k in drive.items():
        coord_drive[c] = k
    return RL.LoopStructure(
        i64(g_base), i64(g_chain_ptr), i64(g_chain), i64(g_lump_ptr), i64(g_lump),
        i64(g_xi_ptr), i64(g_xi), i64(g_loop_ptr), i64(l_fa), i64(l_chain), i64(l_row_ptr),
        i64(l_row), i64(l_coord_ptr), i64(lc_coord), i64(lc_frame), i64(lc_side),
        i64(lc_status), fr_role, fb_ptr, fb_grp, coord_xi, coord_drive)


def describe(cm, ls):
    """A readable summary of a :data:`LoopStructure`: per group its base, chain, outboard
    independents and per loop the dependents (coordinate names)."""
    names = cm.coord_names
    fc = cm.arrays.fr_coord
    out = []
    for g in range(ls.g_base.shape[0]):
        chain = [names[fc[f]] for f in ls.g_chain[ls.g_chain_ptr[g]:ls.g_chain_ptr[g + 1]]
                 if fc[f] >= 0]
        xi = [names[c] for c in ls.g_xi[ls.g_xi_ptr[g]:ls.g_xi_ptr[g + 1]]]
        deps = []
        for lo in range(ls.g_loop_ptr[g], ls.g_loop_ptr[g + 1]):
            a, b = ls.l_coord_ptr[lo], ls.l_coord_ptr[lo + 1]
            deps.append([names[c] for c, s in zip(ls.lc_coord[a:b], ls.lc_status[a:b])
                         if s == RL.ST_OWN])
        out.append(dict(base=int(ls.g_base[g]), chain=chain, outboard=xi, dependents=deps))
    return out


def loop_paths(cm, ls):
    """Per loop of ``ls`` (in its order), the frames whose positions its closure rows depend
    on: the path ``base -> F_A`` then the path ``base -> F_B`` (each outwards, base
    excluded), with the loop's own base (the nearest common ancestor of ``F_A`` and ``F_B``;
    below its group's base for a loop coupled on a different base): ``(ptr, frames)`` in CSR
    form, for the local position updates of the position problem
    (:func:`workbench.formulations.rcr.closure.solve_positions`).  A closure row depends on
    the relative pose of ``F_A`` and ``F_B`` only, so the frames above the loop's base need
    not be updated while its dependents move."""
    ma = cm.arrays
    parent = np.asarray(ma.fr_parent)
    ptr = [0]
    frames = []
    nl = ls.l_fa.shape[0]
    for lo in range(nl):
        fa = int(ls.l_fa[lo])
        fr = set()
        for k in ls.l_row[ls.l_row_ptr[lo]:ls.l_row_ptr[lo + 1]]:
            fr |= set(_entity_frames(ma, int(k)))
        (fb,) = fr - {fa}
        base = _common_ancestor(parent, fa, fb)
        frames += _path(parent, base, fa) + _path(parent, base, fb)
        ptr.append(len(frames))
    return np.asarray(ptr, dtype=np.int64), np.asarray(frames, dtype=np.int64)
