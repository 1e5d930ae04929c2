"""Pairwise RTT storage in numpy: a dense matrix for measured maps, rows from coordinates for derived ones.

A latency map's RTTs as written (`LatencyMap.rtts`) are one of:

- `DenseRtts`: an N x N matrix. Integer microseconds (int32, 4 bytes per pair) when every RTT is a whole number
  of microseconds (every derived value, every value written with at most 3 decimals, the mean of two such), else
  float64 (8 bytes per pair); either gives back exactly the float the map states, so placements break ties as
  before. It may be a read-only memory map of a `.npy` file (`rtt_matrix:` in the map).
- `GeoRtts`: coordinates only; a row is computed on demand from the fibre model (`geo_rtt_ms`, rounded to the
  microsecond) and the pairs the map lists are sparse overrides. Memory grows with N, not N^2.

Both are read-only `Mapping[frozenset, float]` views (one entry per unordered pair, in map order), so code written
for the former dict keeps working on small maps; large maps are read by rows (`row`) and blocks (`block`).
Pure: no I/O beyond the memory map numpy holds.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

EARTH_RADIUS_KM = 6371.0
FIBRE_KM_PER_MS = 200.0
US_PER_MS = 1000.0
# A vectorised fibre-model value whose microsecond fraction lies this close to one half is recomputed with the
# scalar formula (math, Python's correctly rounded `round`), so every derived RTT equals the scalar one exactly.
_HALF_BAND = 1e-6
ROW_CACHE = 256  # derived rows kept (a decision reads the rows of its replicas again and again)

Pair = frozenset[str]


def great_circle_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Haversine distance in km between two points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def fibre_rtt_ms(km: float, stretch: float, base_ms: float) -> float:
    """The fibre model: base + 2 · distance · stretch / (200 km/ms)."""
    return base_ms + 2.0 * km * stretch / FIBRE_KM_PER_MS


def exact_us(values: np.ndarray) -> bool:
    """Whether every value (ms) is a whole number of microseconds that int32 holds, given back exactly by /1000."""
    if values.size == 0:
        return True
    us = np.rint(values * US_PER_MS)
    if np.abs(us).max() >= 2**31:
        return False
    return bool(np.array_equal(us / US_PER_MS, values))


class RttTable(Mapping[Pair, float]):
    """The RTTs of a map as written, by node index; a read-only mapping of pair -> RTT for small maps."""

    kind = "table"

    def __init__(self, names: Sequence[str], index: Mapping[str, int]) -> None:
        self.names = list(names)
        self.index = dict(index)
        self.n = len(self.names)

    # -- by index ------------------------------------------------------------------------------------------
    @abstractmethod
    def value(self, i: int, j: int) -> float:
        """RTT (ms) between nodes i and j (0 on the diagonal)."""

    @abstractmethod
    def row(self, i: int) -> np.ndarray:
        """RTTs (ms, float64) from node i to every node, in map order; read-only."""

    def block(self, idx: Sequence[int]) -> np.ndarray:
        """The k x k matrix (ms, float64) of some nodes' pairwise RTTs."""
        ids = np.asarray(idx, dtype=np.intp)
        return np.stack([self.row(int(i))[ids] for i in ids]) if len(ids) else np.zeros((0, 0))

    @abstractmethod
    def measured(self) -> list[tuple[int, int]]:
        """The pairs (i < j) whose RTT was given rather than derived: the ones the triangle check looks at."""

    def measured_sample(self, limit: int, seed: int = 0) -> tuple[int, list[tuple[int, int]]]:
        """(number of measured pairs, at most `limit` of them: all, or a seeded uniform sample in map order)."""
        pairs = self.measured()
        if len(pairs) <= limit:
            return len(pairs), pairs
        pick = np.sort(np.random.default_rng(seed).choice(len(pairs), limit, replace=False))
        return len(pairs), [pairs[int(k)] for k in pick]

    # -- the mapping view -------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.n * (self.n - 1) // 2

    def __iter__(self) -> Iterator[Pair]:
        names = self.names
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                yield frozenset((a, b))

    def __getitem__(self, pair: Pair) -> float:
        if len(pair) != 2:
            raise KeyError(pair)
        a, b = tuple(pair)
        try:
            return self.value(self.index[a], self.index[b])
        except KeyError:
            raise KeyError(pair) from None

    def __contains__(self, pair: object) -> bool:
        return isinstance(pair, frozenset) and len(pair) == 2 and all(x in self.index for x in pair)

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


class DenseRtts(RttTable):
    """Every pair stored: int32 microseconds or float64 ms, possibly a read-only memory map."""

    kind = "dense"

    def __init__(self, names: Sequence[str], index: Mapping[str, int], matrix: np.ndarray,
                 measured: list[tuple[int, int]] | None = None) -> None:
        super().__init__(names, index)
        self.matrix = matrix
        self.integer = bool(np.issubdtype(matrix.dtype, np.integer))
        self._measured = measured  # None: every pair was measured; else the pairs given (default_rtt_ms map)

    @classmethod
    def from_ms(cls, names: Sequence[str], index: Mapping[str, int], ms: np.ndarray,
                measured: list[tuple[int, int]] | None = None) -> DenseRtts:
        """Store a float64 ms matrix as int32 microseconds when that is exact, else as it is."""
        if exact_us(ms):
            return cls(names, index, np.rint(ms * US_PER_MS).astype(np.int32), measured)
        return cls(names, index, np.ascontiguousarray(ms, dtype=np.float64), measured)

    def value(self, i: int, j: int) -> float:
        """RTT (ms) between nodes i and j."""
        v = self.matrix[i, j]
        return float(v) / US_PER_MS if self.integer else float(v)

    def row(self, i: int) -> np.ndarray:
        """Row i in ms (float64)."""
        r = self.matrix[i]
        return r / US_PER_MS if self.integer else np.array(r, dtype=np.float64)

    def block(self, idx: Sequence[int]) -> np.ndarray:
        """The k x k matrix of some nodes (ms)."""
        ids = np.asarray(idx, dtype=np.intp)
        sub = self.matrix[np.ix_(ids, ids)]
        return sub / US_PER_MS if self.integer else np.array(sub, dtype=np.float64)

    def measured(self) -> list[tuple[int, int]]:
        """Every pair when the matrix was measured; a default_rtt_ms map's pairs given."""
        if self._measured is not None:
            return list(self._measured)
        return [(i, j) for i in range(self.n) for j in range(i + 1, self.n)]

    def measured_sample(self, limit: int, seed: int = 0) -> tuple[int, list[tuple[int, int]]]:
        """(number of measured pairs, at most `limit` of them: all, or a seeded uniform sample in map order)."""
        if self._measured is not None:
            return super().measured_sample(limit, seed)
        n = self.n
        total = n * (n - 1) // 2
        if total <= limit:
            return total, self.measured()
        rng = np.random.default_rng(seed)
        ks = np.sort(rng.choice(total, limit, replace=False))
        # pair number k in map order (row i holds n - 1 - i pairs): invert the cumulative row lengths
        starts = np.concatenate([[0], np.cumsum(np.arange(n - 1, 0, -1))])
        rows = np.searchsorted(starts, ks, side="right") - 1
        cols = ks - starts[rows] + rows + 1
        return total, [(int(i), int(j)) for i, j in zip(rows, cols, strict=True)]

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + int(self.matrix.nbytes)


class GeoRtts(RttTable):
    """RTTs derived from coordinates on demand (fibre model, rounded to the microsecond), plus given pairs."""

    kind = "geo"

    def __init__(self, names: Sequence[str], index: Mapping[str, int], lat: np.ndarray, lon: np.ndarray,
                 stretch: float, base_ms: float, given: Mapping[tuple[int, int], float]) -> None:
        super().__init__(names, index)
        self.lat, self.lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
        self.stretch, self.base_ms = stretch, base_ms
        p, lam = np.radians(self.lat), np.radians(self.lon)
        self.xyz = np.stack([np.cos(p) * np.cos(lam), np.cos(p) * np.sin(lam), np.sin(p)], axis=1)
        self.given: dict[tuple[int, int], float] = {}
        self._given_rows: dict[int, dict[int, float]] = {}
        for (i, j), v in given.items():
            a, b = (i, j) if i < j else (j, i)
            self.given[(a, b)] = v
            self._given_rows.setdefault(a, {})[b] = v
            self._given_rows.setdefault(b, {})[a] = v
        self._rows: OrderedDict[int, np.ndarray] = OrderedDict()
        self._tree: object | None = None

    def _scalar(self, i: int, j: int) -> float:
        """Today's scalar formula, the reference every vectorised value equals."""
        if i == j:
            return 0.0
        km = great_circle_km(self.lat[i], self.lon[i], self.lat[j], self.lon[j])
        return round(fibre_rtt_ms(km, self.stretch, self.base_ms), 3)

    def _from_chord(self, chord: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """RTTs (ms, whole microseconds) for chord lengths on the unit sphere, and where the rounding is too close
        to call (those are recomputed with the scalar formula)."""
        km = 2.0 * EARTH_RADIUS_KM * np.arcsin(np.minimum(1.0, chord / 2.0))
        us_raw = (self.base_ms + 2.0 * km * self.stretch / FIBRE_KM_PER_MS) * US_PER_MS
        us = np.rint(us_raw)
        return us / US_PER_MS, np.abs(np.abs(us_raw - us) - 0.5) < _HALF_BAND

    def derive(self, i: int, cols: np.ndarray | None = None) -> np.ndarray:
        """Derived RTTs (ms) from node i to `cols` (every node when None), ignoring given pairs."""
        xyz = self.xyz if cols is None else self.xyz[cols]
        out, near = self._from_chord(np.sqrt(((xyz - self.xyz[i]) ** 2).sum(axis=1)))
        col_ids = np.arange(self.n) if cols is None else np.asarray(cols)
        for k in np.flatnonzero(near):
            out[k] = self._scalar(i, int(col_ids[k]))
        out[col_ids == i] = 0.0
        return out

    def value(self, i: int, j: int) -> float:
        """RTT (ms) between nodes i and j: given, else derived."""
        if i == j:
            return 0.0
        v = self.given.get((i, j) if i < j else (j, i))
        return self._scalar(i, j) if v is None else v

    def row(self, i: int) -> np.ndarray:
        """Row i in ms (float64, read-only; cached for the last ROW_CACHE nodes asked)."""
        cached = self._rows.get(i)
        if cached is not None:
            self._rows.move_to_end(i)
            return cached
        r = self.derive(i)
        for j, v in self._given_rows.get(i, {}).items():
            r[j] = v
        r.flags.writeable = False
        self._rows[i] = r
        if len(self._rows) > ROW_CACHE:
            self._rows.popitem(last=False)
        return r

    def block(self, idx: Sequence[int]) -> np.ndarray:
        """The k x k matrix of some nodes (ms), derived for the block only."""
        ids = np.asarray(idx, dtype=np.intp)
        pts = self.xyz[ids]
        out, near = self._from_chord(np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2)))
        for a, b in np.argwhere(near):
            out[a, b] = self._scalar(int(ids[a]), int(ids[b]))
        out[ids[:, None] == ids[None, :]] = 0.0
        if self.given:
            pos = {int(x): k for k, x in enumerate(ids)}
            for a, ka in pos.items():
                for b, v in self._given_rows.get(a, {}).items():
                    kb = pos.get(b)
                    if kb is not None:
                        out[ka, kb] = v
        return out

    def measured(self) -> list[tuple[int, int]]:
        """The given pairs (derived pairs satisfy the triangle inequality by construction)."""
        return sorted(self.given)

    def km_for_rtt(self, rtt_ms: float) -> float:
        """The great-circle distance (km) at which the fibre model gives `rtt_ms`."""
        return max(0.0, (rtt_ms - self.base_ms) * FIBRE_KM_PER_MS / (2.0 * self.stretch)) if self.stretch > 0 \
            else (math.inf if rtt_ms >= self.base_ms else 0.0)

    def tree(self) -> object:
        """A KD-tree (scipy cKDTree) of the nodes' unit vectors, built once: candidate search by distance."""
        if self._tree is None:
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self.xyz)
        return self._tree

    def __sizeof__(self) -> int:
        rows = sum(r.nbytes for r in self._rows.values())
        return object.__sizeof__(self) + int(self.xyz.nbytes + self.lat.nbytes * 2) + rows + 100 * len(self.given)


def chord_for_km(km: float) -> float:
    """The straight-line distance between two points of the unit sphere `km` apart on the surface."""
    return 2.0 * math.sin(min(math.pi / 2, km / (2.0 * EARTH_RADIUS_KM)))


def estimate_bytes(n: int, dense: bool) -> int:
    """Memory a map of n nodes takes while loaded: 4 bytes per pair dense, about 2 kB per node derived."""
    return 4 * n * n + 2048 * n if dense else 2048 * n


class ChangedRtts(Mapping[Pair, float]):
    """The RTTs a map's changes set, sparsely: a whole row per node a `node:` change touched, else single pairs.

    A mapping of pair -> RTT in force (one entry per pair set, as the former dict was); `copy` before changing a
    map's own, so the maps of a schedule share nothing mutable.
    """

    def __init__(self, names: Sequence[str], index: Mapping[str, int]) -> None:
        self.names, self.index = names, index
        self.rows: dict[int, np.ndarray] = {}
        self.pairs: dict[int, dict[int, float]] = {}  # symmetric: pairs[i][j] == pairs[j][i]

    def copy(self) -> ChangedRtts:
        """An independent copy."""
        out = ChangedRtts(self.names, self.index)
        out.rows = {i: r.copy() for i, r in self.rows.items()}
        out.pairs = {i: dict(d) for i, d in self.pairs.items()}
        return out

    def get_ij(self, i: int, j: int) -> float | None:
        """The RTT a change set for pair (i, j), None when no change did."""
        r = self.rows.get(i)
        if r is not None:
            return float(r[j])
        r = self.rows.get(j)
        if r is not None:
            return float(r[i])
        d = self.pairs.get(i)
        return None if d is None else d.get(j)

    def set_pair(self, i: int, j: int, value: float) -> None:
        """A change set the RTT of pair (i, j)."""
        stored = False
        for a, b in ((i, j), (j, i)):
            r = self.rows.get(a)
            if r is not None:
                r[b] = value
                stored = True
        if not stored:
            self.pairs.setdefault(i, {})[j] = value
            self.pairs.setdefault(j, {})[i] = value

    def set_row(self, i: int, row: np.ndarray) -> None:
        """A change set every pair of node i (row[i] is 0)."""
        self.rows[i] = np.array(row, dtype=np.float64)
        for j, r in self.rows.items():
            if j != i:
                r[i] = row[j]
        for j in self.pairs.pop(i, {}):
            d = self.pairs.get(j)
            if d is not None:
                d.pop(i, None)
                if not d:
                    del self.pairs[j]

    def overlay(self, i: int, row: np.ndarray) -> np.ndarray:
        """Row i of the map in force, from row i as written (the array is written in place and returned)."""
        mine = self.rows.get(i)
        if mine is not None:
            return mine.copy()
        for j, r in self.rows.items():
            row[j] = r[i]
        for j, v in self.pairs.get(i, {}).items():
            row[j] = v
        return row

    def _ordered_pairs(self) -> list[tuple[int, int]]:
        seen: set[tuple[int, int]] = set()
        n = len(self.names)
        for i in self.rows:
            for j in range(n):
                if j != i:
                    seen.add((min(i, j), max(i, j)))
        for i, d in self.pairs.items():
            for j in d:
                seen.add((min(i, j), max(i, j)))
        return sorted(seen)

    def __len__(self) -> int:
        n = len(self.names)
        k = len(self.rows)
        in_rows = k * (n - 1) - k * (k - 1) // 2
        return in_rows + sum(len(d) for d in self.pairs.values()) // 2

    def __iter__(self) -> Iterator[Pair]:
        for i, j in self._ordered_pairs():
            yield frozenset((self.names[i], self.names[j]))

    def __getitem__(self, pair: Pair) -> float:
        if len(pair) != 2:
            raise KeyError(pair)
        a, b = tuple(pair)
        try:
            v = self.get_ij(self.index[a], self.index[b])
        except KeyError:
            raise KeyError(pair) from None
        if v is None:
            raise KeyError(pair)
        return v

    def __sizeof__(self) -> int:
        return (object.__sizeof__(self) + sum(r.nbytes for r in self.rows.values())
                + sum(64 + 100 * len(d) for d in self.pairs.values()))
