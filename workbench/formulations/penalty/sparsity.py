"""Structural sparsity of ``J = -dQ/d[z; zd]`` from the topology, and the column groups
(Curtis-Powell-Reid) that compress it (seed 003 §3, "sparse Jacobian, four steps": pattern,
colouring, compressed ``B = J S``, recovery).

``Q_j`` (joint coordinate ``j``) collects the loads of the bodies outboard of joint ``j``
projected on its column ``b_j``: it depends on the coordinates of the joints on the root
path of every such body and, through a force element, of every body coupled to one of them.
So the pattern is the union, over the **load groups** (each body alone; the two bodies of a
point-to-point spring or of a rod; the body, wheels and carriers of a speed controller; the
preview body and the steered body of a path follower), of ``S x S`` with ``S`` the
coordinates on the root paths of the group's bodies; the same for the ``z`` and the ``zd``
columns.  Tires, loads and joint springs act on one body or coordinate.
"""

from __future__ import annotations

import numpy as np


def _root_coords(ma, frame: int) -> set:
    """Coordinates of the joints on the root path of ``frame`` (itself included)."""
    out = set()
    f = frame
    while f >= 0:
        c = int(ma.fr_coord[f])
        if c >= 0:
            out.add(c)
        f = int(ma.fr_parent[f])
    return out


def load_groups(ma) -> list[list[int]]:
    """The bodies whose loads are coupled by a force element (one group per element), plus
    every body alone."""
    nb = ma.b_frame.shape[0]
    groups = [[b] for b in range(nb)]
    for s in range(ma.sp_pt.shape[0]):
        groups.append([int(ma.pt_body[ma.sp_pt[s, 0]]), int(ma.pt_body[ma.sp_pt[s, 1]])])
    # rods (seed 002): the two end bodies, coupled by the rod's inertia forces
    for s in range(ma.rd_pt.shape[0]):
        groups.append([int(ma.pt_body[ma.rd_pt[s, 0]]), int(ma.pt_body[ma.rd_pt[s, 1]])])
    for s in range(ma.sc_pt.shape[0]):
        g = [int(ma.pt_body[ma.sc_pt[s]])]
        for w in range(ma.sw_sc.shape[0]):
            if ma.sw_sc[w] == s:
                g.append(int(ma.sw_body[w]))
                if ma.sw_carrier[w] >= 0:
                    g.append(int(ma.sw_carrier[w]))
        groups.append(g)
    # path followers: the preview point's body and the body of the steering joint (the
    # servo force on the coordinate reads the preview point's position)
    for s in range(ma.pf_pt.shape[0]):
        groups.append([int(ma.pt_body[ma.pf_pt[s]]), _coord_body(ma, int(ma.pf_coord[s]))])
    return groups


def _coord_body(ma, c: int) -> int:
    """A body moved by coordinate ``c`` (outboard of its frame), or -1."""
    frames = [f for f in range(ma.fr_coord.shape[0]) if int(ma.fr_coord[f]) == c]
    if not frames:
        return -1
    for b in range(ma.b_frame.shape[0]):
        f = int(ma.b_frame[b])
        while f >= 0:
            if f == frames[0]:
                return b
            f = int(ma.fr_parent[f])
    return -1


def jacobian_pattern(ma, n: int) -> np.ndarray:
    """Boolean ``n x 2n`` structural pattern of ``J = [K C]`` (see the module docstring)."""
    P = np.zeros((n, n), dtype=np.bool_)
    for g in load_groups(ma):
        S = set()
        for b in g:
            if b >= 0 and ma.b_frame[b] >= 0:
                S |= _root_coords(ma, int(ma.b_frame[b]))
        idx = np.array(sorted(S), dtype=np.int64)
        if idx.size:
            P[np.ix_(idx, idx)] = True
    return np.ascontiguousarray(np.hstack([P, P]))


def column_groups(pattern: np.ndarray, colored: bool) -> tuple[np.ndarray, int]:
    """Column groups of ``pattern`` (``color[j]``, number of groups).

    ``colored``: a greedy colouring (largest degree first) of the column intersection graph
    (two columns conflict when they share a row), by :func:`networkx.greedy_color`; columns
    of one colour are structurally orthogonal, so ``J`` is recovered from ``J S`` exactly
    (:func:`check_groups`).  Otherwise each column is its own group (dense Jacobian)."""
    ncol = pattern.shape[1]
    if not colored:
        return np.arange(ncol, dtype=np.int64), ncol
    import networkx as nx

    G = nx.Graph()
    G.add_nodes_from(range(ncol))
    for i in range(pattern.shape[0]):
        cols = np.flatnonzero(pattern[i])
        for a in range(cols.size):
            for b in range(a + 1, cols.size):
                G.add_edge(int(cols[a]), int(cols[b]))
    coloring = nx.greedy_color(G, strategy="largest_first")
    color = np.array([coloring[j] for j in range(ncol)], dtype=np.int64)
    return color, int(color.max()) + 1 if ncol else 0


def check_groups(pattern: np.ndarray, color: np.ndarray) -> bool:
    """True when no row has two non-zeros in columns of the same group."""
    for i in range(pattern.shape[0]):
        c = color[np.flatnonzero(pattern[i])]
        if np.unique(c).size != c.size:
            return False
    return True
