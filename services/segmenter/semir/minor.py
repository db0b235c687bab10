"""SEMIR: the semantic graph minor of a voxel grid and its exact lifting map.

Paper: *SEMIR: Semantic Minor-Induced Representation learning for small-structure
segmentation*, ICML 2026, arXiv 2605.12389 (§3.1 the minor, §3.2 lifting, §3.3 descriptors).

The voxel grid graph G (6-neighbourhood in 3D, 4 in 2D) becomes a minor H by three
parameterized operations, six parameters in all (`MinorParams`):

1. **Edge contraction** (ψ): seed-relative region growing. A voxel joins a seed's supernode
   when its (lightly smoothed: Gaussian, σ = `SMOOTH` voxels) intensity lies within ψ of the
   seed's, so a slow gradient cannot drift. Vectorized in `contraction.py`: seeds are picked
   greedily from the intensity histogram of each catchment (the region a pairwise ψ-contraction
   would form), most frequent intensity first, each claiming every voxel within ψ of it; grid edges
   whose endpoints were claimed by the same seed are contracted. Two union-find passes of
   `paperworks.kernels.ops.grid_contract`; every voxel lies within ψ of its supernode's seed
   intensity (`Minor.seed`), except the partial-volume voxels of sharp borders: regions below
   2^ndim voxels (fragments of the thin shells such a border leaves) join the neighbour whose
   seed is closest to their mean, unless they stand out by more than ψ from every neighbour
   (a small structure, kept), so the minor stays compact (256^3 phantom: ~4k supernodes, not
   57k).
2. **Node deletion** (size range [s_min, s_max] voxels, mean-intensity range [μ_min, μ_max]):
   supernodes outside either range are deleted; their voxels become background.
3. **Edge deletion** (α): an edge between adjacent surviving supernodes whose mean intensities
   differ by more than α is deleted; the faces it stood for are the minor's *cut boundary*.

Lifting (§3.2) is exact: `Minor.node` maps every voxel to exactly one supernode index or to -1
(background), so a node labelling lifts to a voxel labelling by indexing, with no
interpolation (`Minor.lift`).

Boundary elements (§3.4, the few-shot objective): a voxel is on the minor's boundary when one
of its grid neighbours lies in another supernode across a deleted edge, or one of the two is
background and the other not. The target's semantic boundary is every voxel with a neighbour of
another label. `boundary_dice` is the Dice (F1) of the two sets with a tolerance of
`tolerance` voxels (*design choice:* 1, as exact one-voxel boundary overlap is dominated by
which side of a face a boundary is drawn on).

Node descriptors (§3.3), robust to scale and rotation: log size, intensity mean and std,
contrast to the size-weighted mean of the neighbours, contrast to the brightest and to the
darkest neighbour (a lesion is a small blob brighter, or darker, than everything around it; the
size-weighted contrast alone cannot tell it from a region on an organ's border, which is brighter
than the body on one side and darker than the organ on the other: measured on the reproduction's
32^3 phantoms, seed 1, radius 1.5, minor oracle 0.71: the GINE's lesion Dice over three
initializations was 0.33 / 0.46 / 0.73 without these two and 0.73 / 0.66 / 0.73 with them, as border
regions stopped being taken for lesions), principal-axis elongation
(sqrt(λ_min/λ_max) of the coordinate covariance, in physical units), compactness
(size^(2/3) / boundary faces) and log boundary size. Edge features are relative: signed and
absolute mean difference, log contact area, log size ratio, and whether the edge was deleted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from paperworks.services.segmenter.semir.contraction import Runs, seeded_contraction
from scipy import ndimage

SMOOTH = 0.7
NODE_FEATURES = 9
EDGE_FEATURES = 5


@dataclass(frozen=True)
class MinorParams:
    psi: float = 0.1
    size_min: float = 1.0
    size_max: float = 1e9
    intensity_min: float = -1e9
    intensity_max: float = 1e9
    alpha: float = 0.05

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Minor:
    shape: tuple[int, ...]
    region: np.ndarray  # (*shape) int64, the contraction's region of each voxel
    node: np.ndarray  # (*shape) int64, supernode of each voxel, -1 = background
    size: np.ndarray  # (N,) voxels per supernode
    mean: np.ndarray  # (N,)
    std: np.ndarray  # (N,)
    seed: np.ndarray  # (N,) the seed intensity each supernode grew from (smoothed image)
    edges: np.ndarray  # (E, 2) supernode pairs i < j (all adjacent survivors)
    contact: np.ndarray  # (E,) grid faces between the pair
    cut: np.ndarray  # (E,) bool, deleted by the alpha rule
    x: np.ndarray  # (N, NODE_FEATURES) float32
    edge_attr: np.ndarray  # (2E, EDGE_FEATURES) float32, for edge_index
    edge_index: np.ndarray  # (2, 2E) both directions
    regions: int  # supernodes before node deletion
    boundary: np.ndarray  # (*shape) bool, the minor's boundary voxels

    @property
    def nodes(self) -> int:
        return len(self.size)

    def lift(self, node_labels: np.ndarray, background=0) -> np.ndarray:
        """Voxel labels from node labels: exact, every voxel takes its supernode's label."""
        table = np.append(np.asarray(node_labels), background)
        return table[self.node]  # node -1 indexes the appended background entry

    def node_majority(self, labels: np.ndarray, classes: int) -> np.ndarray:
        """Each supernode's majority voxel label."""
        inside = self.node >= 0
        counts = np.bincount(
            self.node[inside] * classes + labels[inside].astype(np.int64), minlength=self.nodes * classes
        ).reshape(self.nodes, classes)
        return counts.argmax(1)

    def node_fraction(self, mask: np.ndarray) -> np.ndarray:
        """Fraction of each supernode's voxels inside `mask`."""
        inside = self.node >= 0
        pos = np.bincount(self.node[inside], weights=mask[inside].astype(np.float64), minlength=self.nodes)
        return pos / np.maximum(self.size, 1)


def _pairs(arr: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    lo = [slice(None)] * arr.ndim
    hi = [slice(None)] * arr.ndim
    lo[axis], hi[axis] = slice(0, -1), slice(1, None)
    return tuple(lo), tuple(hi)


def _mark_faces(shape, faces_by_axis) -> np.ndarray:
    out = np.zeros(shape, bool)
    for axis, face in enumerate(faces_by_axis):
        lo, hi = _pairs(out, axis)
        out[lo] |= face
        out[hi] |= face
    return out


def label_boundary(labels: np.ndarray) -> np.ndarray:
    """Voxels with a grid neighbour of another label (the target's semantic boundary)."""
    faces = []
    for a in range(labels.ndim):
        lo, hi = _pairs(labels, a)
        faces.append(labels[lo] != labels[hi])
    return _mark_faces(labels.shape, faces)


def _moments(runs: Runs, shape, count: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """(R, ndim, ndim) coordinate covariance per region in physical units, exact, from the runs
    along the last axis (a run of n voxels from x0 has closed-form sums of x and x^2)."""
    r, n = runs.region, runs.length.astype(np.float64)
    coords = [c.astype(np.float64) for c in np.unravel_index(runs.first, shape)]
    x0 = coords[-1]
    x1 = x0 + n - 1
    sums = [c * n for c in coords[:-1]] + [(x0 + x1) * n / 2]
    square_x = (x1 * (x1 + 1) * (2 * x1 + 1) - (x0 - 1) * x0 * (2 * x0 - 1)) / 6
    R, d = len(count), len(shape)
    size = np.maximum(count, 1)
    mean = [np.bincount(r, weights=s, minlength=R) / size for s in sums]
    cov = np.zeros((R, d, d))
    for i in range(d):
        for j in range(i, d):
            if i == j == d - 1:
                w = square_x
            elif j == d - 1:
                w = coords[i] * sums[-1]
            else:
                w = coords[i] * coords[j] * n
            v = np.bincount(r, weights=w, minlength=R) / size - mean[i] * mean[j]
            cov[:, i, j] = cov[:, j, i] = v * spacing[i] * spacing[j]
    return cov


def _minor_boundary(region: np.ndarray, keep: np.ndarray, rmean: np.ndarray, alpha: float) -> np.ndarray:
    """Voxels on a face between two regions where one is deleted (and the other not) or the
    edge between them is cut; only the faces between different regions are visited."""
    flat = region.reshape(-1)
    out = np.zeros(flat.size, bool)
    stride = 1
    for a in range(region.ndim - 1, -1, -1):
        n = region.shape[a]
        i = np.flatnonzero(flat[:-stride] != flat[stride:])
        i = i[(i // stride) % n != n - 1]  # the pair stays inside the grid along axis a
        ra, rb = flat[i], flat[i + stride]
        ka, kb = keep[ra], keep[rb]
        face = (ka | kb) & (~ka | ~kb | (np.abs(rmean[ra] - rmean[rb]) > alpha))
        out[i[face]] = True
        out[i[face] + stride] = True
        stride *= n
    return out.reshape(region.shape)


def build_minor(image: np.ndarray, params: MinorParams, spacing=None) -> Minor:
    image = np.ascontiguousarray(image, dtype=np.float32)
    if image.ndim not in (2, 3):
        raise ValueError("image must be 2-D or 3-D")
    spacing = np.ones(image.ndim) if spacing is None else np.asarray(spacing, np.float64)
    smoothed = ndimage.gaussian_filter(image, SMOOTH) if SMOOTH > 0 else image
    sc = seeded_contraction(image, smoothed, max(params.psi, 1e-6))
    gc = sc.regions
    region = gc.labels.numpy().astype(np.int64, copy=False)
    count = gc.region_count.numpy().astype(np.float64)
    rsum = gc.region_sum.numpy().astype(np.float64)
    rsq = gc.region_sq_sum.numpy().astype(np.float64)
    rmean = rsum / np.maximum(count, 1)
    rstd = np.sqrt(np.maximum(rsq / np.maximum(count, 1) - rmean**2, 0.0))
    keep = (
        (count >= params.size_min)
        & (count <= params.size_max)
        & (rmean >= params.intensity_min)
        & (rmean <= params.intensity_max)
    )
    remap = np.full(len(count) + 1, -1, np.int64)
    remap[np.flatnonzero(keep)] = np.arange(int(keep.sum()))
    node = region if keep.all() else remap[region]
    edges_r = gc.edges.numpy().astype(np.int64).reshape(-1, 2)
    contact_r = gc.edge_count.numpy().astype(np.float64)
    boundary = _minor_boundary(region, keep, rmean, params.alpha)
    # surviving nodes and edges
    size, mean, std = count[keep], rmean[keep], rstd[keep]
    n = len(size)
    both = keep[edges_r[:, 0]] & keep[edges_r[:, 1]] if len(edges_r) else np.zeros(0, bool)
    edges = remap[edges_r[both]]
    contact = contact_r[both]
    cut = np.abs(mean[edges[:, 0]] - mean[edges[:, 1]]) > params.alpha if len(edges) else np.zeros(0, bool)
    faces_total = (
        np.bincount(edges_r[:, 0], weights=contact_r, minlength=len(count))
        + np.bincount(edges_r[:, 1], weights=contact_r, minlength=len(count))
        if len(edges_r)
        else np.zeros(len(count))
    )
    bfaces = faces_total[keep]
    # principal-axis elongation from the coordinate covariance (physical units)
    cov = _moments(sc.runs, image.shape, count, spacing)[keep]
    eig = np.linalg.eigvalsh(cov + 1e-6 * np.eye(image.ndim)) if n else np.zeros((0, image.ndim))
    elong = np.sqrt(np.clip(eig[:, 0], 1e-9, None) / np.clip(eig[:, -1], 1e-9, None)) if n else np.zeros(0)
    # neighbour statistics, each edge seen from both ends: the size-weighted mean, and the
    # contrast to the brightest and to the darkest neighbour (a blob standing out from all its
    # surroundings, a lesion, has the first > 0 or the second < 0; a border region never)
    nbr_w = np.zeros(n)
    nbr_m = np.zeros(n)
    above = np.full(n, np.inf)
    below = np.full(n, -np.inf)
    for a, b in ((0, 1), (1, 0)) if len(edges) else ():
        np.add.at(nbr_w, edges[:, a], size[edges[:, b]])
        np.add.at(nbr_m, edges[:, a], size[edges[:, b]] * mean[edges[:, b]])
        d = mean[edges[:, a]] - mean[edges[:, b]]
        np.minimum.at(above, edges[:, a], d)
        np.maximum.at(below, edges[:, a], d)
    contrast = np.where(nbr_w > 0, mean - nbr_m / np.maximum(nbr_w, 1), 0.0)
    above = np.where(np.isfinite(above), above, 0.0)
    below = np.where(np.isfinite(below), below, 0.0)
    compact = size ** ((image.ndim - 1) / image.ndim) / np.maximum(bfaces, 1)
    x = np.stack(
        [np.log(size), mean, std, contrast, above, below, elong, compact, np.log1p(bfaces)], 1
    ).astype(np.float32)
    if len(edges):
        src = np.concatenate([edges[:, 0], edges[:, 1]])
        dst = np.concatenate([edges[:, 1], edges[:, 0]])
        lc = np.log1p(np.concatenate([contact, contact]))
        c2 = np.concatenate([cut, cut]).astype(np.float64)
        d = mean[src] - mean[dst]
        edge_attr = np.stack([d, np.abs(d), lc, np.log(size[src] / size[dst]), c2], 1).astype(np.float32)
        edge_index = np.stack([src, dst])
    else:
        edge_attr = np.zeros((0, EDGE_FEATURES), np.float32)
        edge_index = np.zeros((2, 0), np.int64)
    return Minor(
        shape=image.shape,
        region=region,
        node=node,
        size=size,
        mean=mean,
        std=std,
        seed=sc.seed_level[keep],
        edges=edges,
        contact=contact,
        cut=cut,
        x=x.reshape(n, NODE_FEATURES),
        edge_attr=edge_attr,
        edge_index=edge_index,
        regions=len(count),
        boundary=boundary,
    )


def boundary_dice(pred: np.ndarray, target: np.ndarray, tolerance: int = 1) -> float:
    """Dice (F1) of two boundary sets, each voxel matched within `tolerance` voxels."""
    if not pred.any() and not target.any():
        return 1.0
    if not pred.any() or not target.any():
        return 0.0
    st = ndimage.generate_binary_structure(pred.ndim, 1)
    dt = ndimage.binary_dilation(target, st, iterations=tolerance) if tolerance else target
    dp = ndimage.binary_dilation(pred, st, iterations=tolerance) if tolerance else pred
    precision = (pred & dt).sum() / pred.sum()
    recall = (target & dp).sum() / target.sum()
    return float(2 * precision * recall / max(precision + recall, 1e-12))


def dice(pred: np.ndarray, target: np.ndarray) -> float:
    p, t = pred.astype(bool), target.astype(bool)
    if not p.any() and not t.any():
        return 1.0
    return float(2 * (p & t).sum() / (p.sum() + t.sum()))


def oracle_dice(minor: Minor, labels: np.ndarray, structures) -> dict[int, float]:
    """Dice of the lifted node-majority labelling per structure: the minor's ceiling."""
    classes = int(labels.max()) + 1
    lifted = minor.lift(minor.node_majority(labels, classes))
    return {int(s): dice(lifted == s, labels == s) for s in structures}
