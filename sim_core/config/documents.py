"""Parse YAML or JSON text with limits checked before anything large is built.

PyYAML's safe loader composes a graph of nodes in which an alias is a second reference to its
anchor's node, so a 342-byte "billion laughs" document is small until something walks it (a
validator, `repr`, `json.dumps`). `ScenarioLoader` counts, while composing, how many values
each node stands for with every alias use expanded, and refuses the document once that passes
MAX_VALUES; it also refuses nesting deeper than MAX_DEPTH, an alias inside its own anchor,
duplicate mapping keys and integers too long to convert. JSON gets the same depth and
duplicate-key rules. Every refusal is a `DocumentError` that names the line (YAML, and JSON
nesting) and the reason.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import yaml

from sim_core.config.limits import MAX_DEPTH, MAX_VALUES
from sim_core.errors import shown

MERGE_TAG = "tag:yaml.org,2002:merge"


class DocumentError(Exception):
    """A document refused by a limit; `line` is 1-based, None when unknown."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line


class _Refused(yaml.YAMLError):
    """Raised inside the loader; parse_yaml turns it into a DocumentError."""

    def __init__(self, reason: str, mark: yaml.Mark | None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, mark.line + 1 if mark is not None else None


class ScenarioLoader(yaml.SafeLoader):
    """yaml.SafeLoader with the limits above (see the module docstring)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0                      # collections open around the node being composed
        self._values: dict[int, int] = {}   # id(node) -> values it stands for, aliases expanded
        self._checked: set[int] = set()     # mappings whose keys were checked for duplicates

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        mark = self.peek_event().start_mark
        alias = self.check_event(yaml.AliasEvent)
        nested = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if nested and self._depth >= MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += nested
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= nested
        if alias:   # a complete node counts again at every use; an incomplete one is an ancestor
            if id(node) not in self._values:
                raise _Refused("an alias refers to a node that contains it (a recursive structure)", mark)
            return node
        count = 1 + sum(self._values[id(child)] for child in _children(node))
        if count > MAX_VALUES:
            raise _Refused(f"the document expands to more than {MAX_VALUES:,} values (every use of an "
                           "alias counts its anchor's values again); refused before building it", mark)
        self._values[id(node)] = count
        return node

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Refuse a key written twice in one mapping (merged `<<` keys may be overridden);
        checked at the first call, before merging changes `node.value`."""
        if id(node) not in self._checked:
            self._checked.add(id(node))
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise _Refused(f"duplicate key {shown(key, 60)} (first on line {seen[key]})", key_node.start_mark)
                seen[key] = key_node.start_mark.line + 1
        super().flatten_mapping(node)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:   # more digits than Python converts
            digits = sum(c.isdigit() for c in node.value)
            raise _Refused(f"an integer of {digits} digits, too long to be a number", node.start_mark) from None


ScenarioLoader.add_constructor("tag:yaml.org,2002:int", ScenarioLoader.construct_yaml_int)


def _children(node: yaml.Node | None) -> list:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def parse_yaml(text: str) -> object:
    """The document in `text` (safe types only).

    Raises:
        DocumentError: a limit of the module docstring is passed.
        yaml.YAMLError: the text is not YAML.
    """
    loader = ScenarioLoader(text)
    try:
        return loader.get_single_data()
    except _Refused as refused:
        raise DocumentError(refused.reason, refused.line) from None
    finally:
        loader.dispose()


def parse_json(text: str) -> object:
    """The JSON document in `text`, refusing duplicate keys, nesting deeper than MAX_DEPTH and
    integers too long to convert.

    Raises:
        DocumentError: a limit is passed (nesting and long integers name their line).
        json.JSONDecodeError: the text is not JSON.
    """
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs)
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels", _line_too_deep(text)) from None
    except json.JSONDecodeError:
        raise
    except ValueError:   # an integer literal over Python's digit limit
        match = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", text)
        line = text.count("\n", 0, match.start()) + 1 if match else None
        digits = len(match.group()) if match else "too many"
        raise DocumentError(f"an integer of {digits} digits, too long to be a number", line) from None
    if isinstance(data, (list, dict)):
        line = _line_too_deep(text)
        if line is not None:
            raise DocumentError(f"nested deeper than {MAX_DEPTH} levels", line)
    return data


def _unique_pairs(pairs: list) -> dict:
    data = dict(pairs)
    if len(data) < len(pairs):
        seen: set = set()
        for key, _ in pairs:   # the first key written twice
            if key in seen:
                break
            seen.add(key)
        raise DocumentError(f"duplicate key {shown(key, 60)} in a JSON object")
    return data


def _line_too_deep(text: str) -> int | None:
    """The line where JSON brackets (outside strings) first open more than MAX_DEPTH levels,
    or None; vectorised, so a 5 MB document costs milliseconds."""
    data = np.frombuffer(re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text).encode(), dtype=np.uint8)
    step = np.isin(data, (ord("["), ord("{"))).astype(np.int64) - np.isin(data, (ord("]"), ord("}")))
    deep = np.flatnonzero(np.cumsum(step) > MAX_DEPTH)
    return int(np.count_nonzero(data[: deep[0]] == ord("\n"))) + 1 if len(deep) else None
