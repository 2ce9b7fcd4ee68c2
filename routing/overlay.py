"""The broker overlay: brokers, weighted links and the sources attached to them.

An :class:`Overlay` wraps an undirected :class:`networkx.Graph` whose nodes are broker
ids and whose edges carry a ``weight`` (a link's cost, e.g. latency). It is read from
and written to a small YAML/JSON config, built by the generators in
:mod:`routing.generators`, and gives one :class:`~routing.trees.BroadcastTree` per
root broker.

>>> ov = Overlay.from_dict({"brokers": ["a", "b", "c"], "links": [["a", "b"], ["b", "c", 2]],
...                         "sources": [{"id": "news", "root": "a"}]})
>>> ov.brokers, ov.root_of("news")
(['a', 'b', 'c'], 'a')
>>> ov.tree("a").children["b"]
['c']

Config format (YAML or JSON)::

    name: figure4
    brokers: [b1, b2, b3]            # or mappings: {id: b1, capacity: 2.0, location: [x, y],
                                     #   budget: "atoms=500,states=2000"}  (routing-table budget)
    links:                           # [a, b] or [a, b, weight]; weight defaults to 1
      - [b1, b2]
      - [b2, b3, 2.5]
    sources:                         # optional: data sources and their root brokers
      - {id: news, root: b1}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import networkx as nx

from routing.budget import Budget, BudgetError
from routing.trees import BroadcastTree, TreeBuilder, shortest_path_tree

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


class OverlayError(ValueError):
    """An overlay config or change that cannot work (unknown broker, disconnected graph, ...)."""


def check_id(kind: str, value: Any) -> str:
    """Broker and source ids end up in Kafka topic names and Kubernetes object names."""
    if not isinstance(value, str) or not _ID.match(value):
        raise OverlayError(
            f"{kind} id {value!r} is not valid: use 1-63 letters, digits, '-' or '_', starting with a letter or digit"
        )
    return value


@dataclass(frozen=True)
class TreeChange:
    """What an overlay change means for routing: per root broker, the output links
    ``(broker, child)`` whose routing entries must be rebuilt (new links, or links
    whose set of downstream brokers changed) and the ones that disappeared."""

    rebuild: dict[str, set[tuple[str, str]]]
    removed: dict[str, set[tuple[str, str]]]

    @property
    def empty(self) -> bool:
        return not any(self.rebuild.values()) and not any(self.removed.values())


class Overlay:
    """Brokers, weighted links and sources; broadcast trees computed on demand."""

    def __init__(
        self,
        graph: nx.Graph,
        sources: dict[str, str] | None = None,
        name: str = "overlay",
        tree_builder: TreeBuilder = shortest_path_tree,
    ) -> None:
        self.graph = graph
        self.sources = dict(sources or {})
        self.name = name
        self.tree_builder = tree_builder
        self._trees: dict[str, BroadcastTree] = {}
        self._validate()

    def _validate(self) -> None:
        if self.graph.number_of_nodes() == 0:
            raise OverlayError("an overlay needs at least one broker")
        for b in self.graph.nodes:
            check_id("broker", b)
        for a, b, w in self.graph.edges(data="weight", default=1.0):
            if not isinstance(w, (int, float)) or w <= 0:
                raise OverlayError(f"link {a}-{b} has weight {w!r}; weights must be positive numbers")
        if not nx.is_connected(self.graph):
            parts = sorted(sorted(c) for c in nx.connected_components(self.graph))
            raise OverlayError(f"the overlay is not connected: {len(parts)} separate parts, e.g. {parts[0]} and {parts[1]}")
        for source, root in self.sources.items():
            check_id("source", source)
            if root not in self.graph:
                raise OverlayError(f"source {source!r} names root broker {root!r}, which is not in the overlay")

    @property
    def brokers(self) -> list[str]:
        return sorted(self.graph.nodes)

    @property
    def links(self) -> list[tuple[str, str, float]]:
        return sorted((min(a, b), max(a, b), float(w)) for a, b, w in self.graph.edges(data="weight", default=1.0))

    def root_of(self, source: str) -> str:
        """The root broker of a data source."""
        try:
            return self.sources[source]
        except KeyError:
            raise OverlayError(f"unknown source {source!r}; known: {sorted(self.sources)}") from None

    @property
    def roots(self) -> list[str]:
        """Root brokers of the declared sources (every broker if none is declared)."""
        return sorted(set(self.sources.values())) or self.brokers

    def tree(self, root: str) -> BroadcastTree:
        """The broadcast tree rooted at ``root`` (computed once, cached until the overlay changes)."""
        if root not in self.graph:
            raise OverlayError(f"unknown broker {root!r}")
        if root not in self._trees:
            self._trees[root] = self.tree_builder(self.graph, root)
        return self._trees[root]

    def attrs(self, broker: str) -> dict[str, Any]:
        """The broker's attributes from the config (capacity, location, ...)."""
        return dict(self.graph.nodes[broker])

    def budget(self, broker: str) -> Budget | None:
        """The routing-table budget the config gives ``broker`` (its ``budget``), if any.

        >>> Overlay.from_dict({"brokers": [{"id": "a", "budget": "atoms=50"}, "b"], "links": [["a", "b"]]}).budget("a")
        Budget(atoms=50, states=None, predicates=None)
        """
        text = self.graph.nodes[broker].get("budget")
        return Budget.parse(str(text)) if text else None

    def distance(self, a: str, b: str) -> float:
        """Weighted shortest-path distance between two brokers."""
        return nx.shortest_path_length(self.graph, a, b, weight="weight")

    # -- changes ---------------------------------------------------------------

    def _change(self, mutate: Callable[[nx.Graph], None]) -> TreeChange:
        before = {r: self.tree(r) for r in self.roots}
        graph = self.graph.copy()
        mutate(graph)
        candidate = Overlay(graph, self.sources, self.name, self.tree_builder)
        self.graph, self._trees = candidate.graph, {}
        rebuild, removed = {}, {}
        for root in self.roots:
            old = before.get(root)
            new = self.tree(root)
            old_below = old.downstream() if old else {}
            new_below = new.downstream()
            rebuild[root] = {link for link, below in new_below.items() if old_below.get(link) != below}
            removed[root] = set(old_below) - set(new_below)
        return TreeChange(rebuild, removed)

    def add_broker(self, broker: str, links: list[tuple[str, float]], **attrs: Any) -> TreeChange:
        """Add a broker linked to existing ones; returns the routing entries to rebuild."""
        check_id("broker", broker)
        if broker in self.graph:
            raise OverlayError(f"broker {broker!r} is already in the overlay")
        if not links:
            raise OverlayError(f"broker {broker!r} needs at least one link to the overlay")

        def mutate(g: nx.Graph) -> None:
            g.add_node(broker, **attrs)
            for other, weight in links:
                if other not in g:
                    raise OverlayError(f"cannot link {broker!r} to unknown broker {other!r}")
                g.add_edge(broker, other, weight=weight)

        return self._change(mutate)

    def remove_broker(self, broker: str) -> TreeChange:
        """Remove a broker (not a source's root); returns the routing entries to rebuild."""
        if broker not in self.graph:
            raise OverlayError(f"unknown broker {broker!r}")
        rooted = sorted(s for s, r in self.sources.items() if r == broker)
        if rooted:
            raise OverlayError(f"broker {broker!r} is the root of sources {rooted}; move them first")
        return self._change(lambda g: g.remove_node(broker))

    # -- config ----------------------------------------------------------------

    @classmethod
    def from_dict(cls, config: dict[str, Any], tree_builder: TreeBuilder = shortest_path_tree) -> "Overlay":
        """Build from a parsed config (see the module docstring for the format)."""
        if not isinstance(config, dict):
            raise OverlayError("an overlay config must be a mapping with 'brokers' and 'links'")
        unknown = set(config) - {"name", "brokers", "links", "sources"}
        if unknown:
            raise OverlayError(f"unknown overlay config keys: {sorted(unknown)}")
        graph = nx.Graph()
        for entry in config.get("brokers") or []:
            spec = {"id": entry} if isinstance(entry, str) else dict(entry)
            broker = check_id("broker", spec.pop("id", None))
            if broker in graph:
                raise OverlayError(f"broker {broker!r} is listed twice")
            if "budget" in spec:
                try:
                    Budget.parse(str(spec["budget"]))
                except BudgetError as exc:
                    raise OverlayError(f"broker {broker!r}: {exc}") from None
            graph.add_node(broker, **spec)
        for i, link in enumerate(config.get("links") or []):
            if not isinstance(link, (list, tuple)) or len(link) not in (2, 3):
                raise OverlayError(f"link #{i + 1} {link!r} must be [a, b] or [a, b, weight]")
            a, b = link[0], link[1]
            for end in (a, b):
                if end not in graph:
                    raise OverlayError(f"link #{i + 1} {a}-{b} names unknown broker {end!r}")
            if a == b:
                raise OverlayError(f"link #{i + 1} connects broker {a!r} to itself")
            graph.add_edge(a, b, weight=link[2] if len(link) == 3 else 1.0)
        sources = {}
        for entry in config.get("sources") or []:
            if not isinstance(entry, dict) or "id" not in entry or "root" not in entry:
                raise OverlayError(f"source {entry!r} must be a mapping with 'id' and 'root'")
            sources[entry["id"]] = entry["root"]
        return cls(graph, sources, str(config.get("name", "overlay")), tree_builder)

    def to_dict(self) -> dict[str, Any]:
        brokers = [{"id": b, **self.attrs(b)} if self.attrs(b) else b for b in self.brokers]
        return {
            "name": self.name,
            "brokers": brokers,
            "links": [[a, b, w] if w != 1.0 else [a, b] for a, b, w in self.links],
            "sources": [{"id": s, "root": r} for s, r in sorted(self.sources.items())],
        }

    @classmethod
    def load(cls, path: str | Path) -> "Overlay":
        """Read a ``.yaml``/``.yml``/``.json`` overlay config."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise OverlayError(f"cannot read overlay config {path}: {exc.strerror}") from None
        return cls.from_dict(_parse(text, path.suffix, str(path)))

    def dump(self, path: str | Path) -> None:
        path = Path(path)
        if path.suffix == ".json":
            path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        else:
            import yaml

            path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def _parse(text: str, suffix: str, where: str) -> Any:
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise OverlayError(f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise OverlayError(f"{where}: invalid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def builtin(name: str = "figure4") -> Overlay:
    """An overlay shipped with Onyx (``routing/overlays/<name>.yaml``)."""
    ref = resources.files("routing") / "overlays" / f"{name}.yaml"
    if not ref.is_file():
        raise OverlayError(f"no built-in overlay {name!r}")
    return Overlay.from_dict(_parse(ref.read_text(), ".yaml", f"built-in overlay {name}"))
