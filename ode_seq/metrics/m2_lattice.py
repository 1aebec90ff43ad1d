"""The MaxMatch edit lattice (Dahlmeier & Ng 2012) and its gold-matching shortest path.

Vertices are cells ``(i, j)`` of Levenshtein alignments of source tokens ``s[0:n]`` with
hypothesis tokens ``h[0:m]``; an edge ``(i, j) -> (i', j')`` is the edit ``s[i:i'] -> h[j:j']``.

1. Base edges: every edge on some minimum-cost alignment path, for two cost models
   (insertion = deletion = 1, substitution 1 or 2, match 0), merged. An edge present in both
   alignments counts twice, as in the official scorer, which keeps both copies.
2. Transitive arcs: edges may be chained into one edit while the chain crosses at most
   ``max_unchanged_words`` unchanged tokens. Vertices are visited in lexicographic (topological)
   order ``k``; for every arc ``i -> k`` and base edge ``k -> j`` the arc ``i -> j`` is set to
   length ``d(i, k) + 1`` when that is shorter than its current length (the official scorer's
   Floyd–Warshall closure computes exactly this, since arcs out of ``k`` are still base edges
   when ``k`` is visited). Each improvement appends one more copy of the arc. Chains made only of
   matches are then dropped, except that the one after a dropped chain survives (the official
   scorer removes them from the list it is iterating over).
3. Weights for one annotator's gold edits: an edge whose edit equals a gold edit (span and one of
   its corrections) weighs ``-|E|``; any other edge weighs its length plus ``EPSILON`` per copy
   unless it is an unchanged span. Insertions at one source position share a two-pointer
   assignment of gold insertions taken from both ends, so that one gold insertion is not
   rewarded on every parallel path.
4. The edit sequence is a shortest path from ``(0, 0)`` to ``(n, m)`` found by Bellman–Ford over
   the edge list in the official order (sorted base edges, then arcs by creation), which fixes
   the tie-breaking; unchanged spans are left out of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Set, Tuple

from .m2_format import GoldEdit

EPSILON = 0.001
Edge = int  # an edge u -> v is the integer u * size + v (so edges sort as (u, v) pairs)


@dataclass(frozen=True)
class SystemEdit:
    """The hypothesis replaces ``source[start:end]`` (``original``) by ``correction``."""

    start: int
    end: int
    original: str
    correction: str


class EditLattice:
    """All candidate edits between ``source`` and ``hypothesis``.

    Vertex ``(i, j)`` is the integer ``i * (m + 1) + j``; ``size`` is the number of vertex ids.
    ``edges`` lists edge copies in the official relaxation order; ``length[e]`` is the number of
    base edges an edge chains, ``unchanged[e]`` how many of them are matches, and ``changing`` holds
    the edges that are not all matches (the ones that are system edits)."""

    def __init__(self, source: Sequence[str], hypothesis: Sequence[str], max_unchanged_words: int = 2):
        self.source = tuple(source)
        self.hypothesis = tuple(hypothesis)
        self.width = len(self.hypothesis) + 1
        self.size = (len(self.source) + 1) * self.width
        self.end_vertex = self.size - 1
        copies: Dict[Edge, int] = {}
        for substitution_cost in (1, 2):
            for u, v in _alignment_edges(self.source, self.hypothesis, substitution_cost):
                key = u * self.size + v
                copies[key] = copies.get(key, 0) + 1
        self.vertices = sorted({v for key in copies for v in divmod(key, self.size)} | {0})
        self.length: Dict[Edge, int] = dict.fromkeys(copies, 1)
        self.unchanged: Dict[Edge, int] = {key: int(self._is_match(key)) for key in copies}
        self.edges: List[Edge] = [key for key in sorted(copies) for _ in range(copies[key])]
        self.edges += self._surviving(self._transitive_arcs(sorted(copies), max_unchanged_words))
        self.changing = {key for key in self.length if self.unchanged[key] != self.length[key]}
        self._reward = -len(self.edges)
        self._span_groups = self._group_by_span()
        # With no gold edit in its span, every copy of a changing edge adds EPSILON (both rules agree).
        self._weights_without_gold: Dict[Edge, float] = dict(self.length)
        for key in self.edges:
            if key in self.changing:
                self._weights_without_gold[key] += EPSILON
        self._edit_cache: Dict[Edge, SystemEdit] = {}

    def _is_match(self, key: Edge) -> bool:
        (i, j), (k, l) = (divmod(vertex, self.width) for vertex in divmod(key, self.size))
        return k == i + 1 and l == j + 1 and self.source[i] == self.hypothesis[j]

    def _transitive_arcs(self, base: List[Edge], max_unchanged_words: int) -> List[Edge]:
        """Step 2 of the module docstring; returns the arc copies in creation order."""
        size, length, unchanged = self.size, self.length, self.unchanged
        successors: Dict[int, List[int]] = {}
        incoming: Dict[int, Set[int]] = {}
        for key in base:
            u, v = divmod(key, size)
            successors.setdefault(u, []).append(v)
            incoming.setdefault(v, set()).add(u)
        created: List[Edge] = []
        for k in self.vertices:
            out_of_k = [(j, unchanged[k * size + j]) for j in successors.get(k, ())]
            for i in sorted(incoming.get(k, ())):
                into_k = i * size + k
                candidate_length = length[into_k] + 1
                unchanged_to_k = unchanged[into_k]
                for j, unchanged_step in out_of_k:
                    arc = i * size + j
                    current = length.get(arc)
                    if current is not None and current <= candidate_length:
                        continue
                    if unchanged_to_k + unchanged_step > max_unchanged_words:
                        continue
                    if current is None:
                        incoming.setdefault(j, set()).add(i)
                    length[arc] = candidate_length
                    unchanged[arc] = unchanged_to_k + unchanged_step
                    created.append(arc)
        return created

    def _surviving(self, arcs: List[Edge]) -> List[Edge]:
        """Arc copies left after dropping all-match chains, where the one after a drop is kept."""
        kept: List[Edge] = []
        after_removal = False
        for arc in arcs:
            if not after_removal and self.unchanged[arc] == self.length[arc]:
                after_removal = True
                del self.length[arc], self.unchanged[arc]
                continue
            after_removal = False
            kept.append(arc)
        return kept

    def edit(self, key: Edge) -> SystemEdit:
        """The edit ``source[i:k] -> hypothesis[j:l]`` of the edge ``(i, j) -> (k, l)``."""
        cached = self._edit_cache.get(key)
        if cached is None:
            (i, j), (k, l) = (divmod(vertex, self.width) for vertex in divmod(key, self.size))
            cached = SystemEdit(i, k, " ".join(self.source[i:k]), " ".join(self.hypothesis[j:l]))
            self._edit_cache[key] = cached
        return cached

    def _group_by_span(self) -> Dict[Tuple[int, int], List[Edge]]:
        """Edge copies keyed by their source span ``(start, end)``, each list sorted."""
        row_span = self.width * self.size
        groups: Dict[Tuple[int, int], List[Edge]] = {}
        for key in self.edges:
            groups.setdefault((key // row_span, key % self.size // self.width), []).append(key)
        for group in groups.values():
            group.sort()
        return groups

    def weights(self, gold: Sequence[GoldEdit]) -> Dict[Edge, float]:
        """Edge weights for one annotator's gold edits (see the module docstring, step 3)."""
        weight = dict(self._weights_without_gold)
        gold_by_span: Dict[Tuple[int, int], List[GoldEdit]] = {}
        for edit in gold:
            gold_by_span.setdefault((edit.start, edit.end), []).append(edit)
        for span, candidates in gold_by_span.items():
            group = self._span_groups.get(span, [])
            for key in group:
                weight[key] = self.length[key]
            if span[0] == span[1]:
                self._weigh_insertions(group, candidates, weight)
                continue
            for key in group:
                correction = self.edit(key).correction
                if any(g.matches(span[0], span[1], correction) for g in candidates):
                    weight[key] = self._reward
                elif key in self.changing:
                    weight[key] += EPSILON
        return weight

    def _weigh_insertions(self, group: List[Edge], gold: List[GoldEdit], weight: Dict[Edge, float]) -> None:
        """Gold insertions at one position are claimed by sorted insertion edges taken alternately
        from the left and right end; after a claim, the walk continues along the claimed edge's
        chain and every edge it passes over gets ``EPSILON``."""
        size = self.size
        left, right, current = 0, len(group) - 1, 0
        gold_left, gold_right = 0, len(gold) - 1
        while left <= right:
            key = group[current]
            correction = self.edit(key).correction
            from_left = current == left
            order = range(gold_left, gold_right + 1) if from_left else range(gold_right, gold_left - 1, -1)
            claimed = next((g for g in order if correction in gold[g].corrections), None)
            if claimed is None:
                weight[key] += EPSILON
                if from_left:
                    left, current = left + 1, right
                else:
                    right, current = right - 1, left
                continue
            weight[key] = self._reward
            if from_left:
                gold_left, left = claimed + 1, left + 1
                while left < len(group) and group[left] // size != key % size:
                    weight[group[left]] += EPSILON
                    left += 1
                current = left
            else:
                gold_right, right = claimed - 1, right - 1
                while right >= 0 and group[right] % size != key // size:
                    weight[group[right]] += EPSILON
                    right -= 1
                current = right

    def best_edits(self, gold: Sequence[GoldEdit]) -> List[SystemEdit]:
        """The edits, in source order, of the path that best matches ``gold`` (step 4)."""
        weight = self.weights(gold)
        size = self.size
        relaxations = [(key // size, key % size, weight[key]) for key in self.edges]
        distance = [float("inf")] * size
        distance[0] = 0
        predecessor: Dict[int, int] = {}
        for _ in range(len(self.vertices) - 1):
            changed = False
            for u, v, w in relaxations:
                candidate = distance[u] + w
                if candidate < distance[v]:
                    distance[v] = candidate
                    predecessor[v] = u
                    changed = True
            if not changed:
                break
        path: List[SystemEdit] = []
        vertex = self.end_vertex
        while vertex in predecessor:
            key = predecessor[vertex] * size + vertex
            if key in self.changing:
                path.append(self.edit(key))
            vertex = predecessor[vertex]
        path.reverse()
        return path


def _alignment_edges(source: Sequence[str], hypothesis: Sequence[str], substitution_cost: int) -> Set[Tuple[int, int]]:
    """Edges ``(u, v)`` of all minimum-cost alignments, traced back from ``(n, m)``."""
    n, m = len(source), len(hypothesis)
    width = m + 1
    table = [list(range(width))]
    for i in range(1, n + 1):
        above, row = table[-1], [i] * width
        token = source[i - 1]
        for j in range(1, width):
            diagonal = above[j - 1] + (0 if token == hypothesis[j - 1] else substitution_cost)
            row[j] = min(diagonal, above[j] + 1, row[j - 1] + 1)
        table.append(row)
    edges: Set[Tuple[int, int]] = set()
    stack, seen = [(n, m)], {(n, m)}
    while stack:
        i, j = stack.pop()
        cost = table[i][j]
        predecessors = []
        if i and j and table[i - 1][j - 1] + (0 if source[i - 1] == hypothesis[j - 1] else substitution_cost) == cost:
            predecessors.append((i - 1, j - 1))
        if i and table[i - 1][j] + 1 == cost:
            predecessors.append((i - 1, j))
        if j and table[i][j - 1] + 1 == cost:
            predecessors.append((i, j - 1))
        for cell in predecessors:
            edges.add((cell[0] * width + cell[1], i * width + j))
            if cell not in seen:
                seen.add(cell)
                stack.append(cell)
    return edges
