"""Bound widgets: the one place that names a widget's key, gives its first value, keeps it across
page switches and writes its edits back.

Streamlit forgets a widget's state when the user leaves its page, so no value lives only in a
widget: a bound widget mirrors a *home* kept in plain (non-widget) session state and writes each
edit there. Each function returns the keyword arguments (`key`, `on_change`, `args`) to pass to
the widget, and sets the widget's value before it is drawn; never pass `value=` as well.

- `scenario_field(path, place)`, key `w:<place>:<path>`: the home is the scenario's field; an
  edit replaces the scenario if it validates, else it is explained and undone.
- `page_value(page, name, default)`, key `<page>_<name>`: the home is the value the user set on
  that page, else `default`; an edit is kept while it differs from `default`.
- `page_value(..., with_scenario=True)`, key `w:<page>_<name>`: the same, forgotten when the
  scenario is replaced (`replace_scenario`).
- `session_value(page, name, store)`, key `<page>_<name>`: the home is `st.session_state[store]`,
  a value several pages read; an edit is stored there.

One rule keeps every bound widget true: before it is drawn, a widget whose state differs from its
home is set to it. So a widget shows its home again after a page switch, after the scenario was
replaced or changed elsewhere (the sidebar, another page, an implied change) and after its own
edit was refused; no code drops widget keys by hand. A page value equal to its default is not
kept, so it follows the default (which may come from the scenario).

Widgets that only choose what to show of the current run (a time window, a sort order, an
operator) are not bound: they keep a plain page-unique `key=` and start over when their page is
shown again. Buttons and file uploaders are actions, not values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from explorer.state import ERROR_KEY, get_path, scenario, set_field, try_scenario

SCENARIO_PREFIX = "w:"     # keys of widgets whose home goes with the scenario
PAGE_VALUES, SCENARIO_VALUES = "page_values", "scenario_page_values"    # {widget key: value the user set}


def _same(value: Any) -> Any:
    return value


def scenario_field(path: str, place: str, show: Callable[[Any], Any] = _same, parse: Callable[[Any], Any] = _same,
                   default: Any = None) -> dict:
    """Bind a widget to the scenario field at the dotted `path` (`default` when the scenario omits
    it). `place` tells apart widgets of one field on different parts of the screen; `show` turns
    the field's value into the widget's, `parse` the widget's back (a ValueError is explained and
    the field keeps its value)."""
    key = f"{SCENARIO_PREFIX}{place}:{path}"
    _mirror(key, show(get_path(scenario(), path, default)))
    return {"key": key, "on_change": _edit_field, "args": (key, path, parse)}


def _edit_field(key: str, path: str, parse: Callable[[Any], Any]) -> None:
    try:
        value = parse(st.session_state[key])
    except ValueError as error:
        st.session_state[ERROR_KEY] = f"{path}: {error}"
        return
    set_field(path, value)


def page_value(page: str, name: str, default: Any, with_scenario: bool = False) -> dict:
    """Bind a widget to a value of `page` that survives page switches (`default` until the user
    sets another). `with_scenario`: the value describes the scenario being edited, so replacing
    the scenario (`replace_scenario`) forgets it."""
    store = SCENARIO_VALUES if with_scenario else PAGE_VALUES
    key = f"{SCENARIO_PREFIX if with_scenario else ''}{page}_{name}"
    values = st.session_state.setdefault(store, {})
    if key in values and values[key] == default:
        del values[key]                          # the default caught up with it: follow the default again
    _mirror(key, values.get(key, default))
    return {"key": key, "on_change": _keep_edit, "args": (store, key, default)}


def _keep_edit(store: str, key: str, default: Any) -> None:
    values = st.session_state.setdefault(store, {})
    if st.session_state[key] == default:
        values.pop(key, None)
    else:
        values[key] = st.session_state[key]


def session_value(page: str, name: str, store: str) -> dict:
    """Bind a widget of `page` to `st.session_state[store]`, a value other pages read too (None
    until set)."""
    key = f"{page}_{name}"
    _mirror(key, st.session_state.get(store))
    return {"key": key, "on_change": _store_edit, "args": (store, key)}


def _store_edit(store: str, key: str) -> None:
    st.session_state[store] = st.session_state[key]


def kept(page: str) -> dict[str, Any]:
    """The values the user set on `page` (without the scenario-bound ones), by name."""
    prefix = f"{page}_"
    return {key[len(prefix):]: value for key, value in st.session_state.get(PAGE_VALUES, {}).items()
            if key.startswith(prefix)}


def keep(page: str, name: str, value: Any) -> None:
    """Set a value of `page` without its widget (e.g. the first edits of a new Compare variant)."""
    st.session_state.setdefault(PAGE_VALUES, {})[f"{page}_{name}"] = value


def replace_scenario(candidate: dict) -> bool:
    """Make `candidate` the scenario (a preset, an import, a link, an upload, a capacity point) if
    it validates, forgetting the page values that went with the old one."""
    if not try_scenario(candidate, loaded=True):
        return False
    st.session_state.pop(SCENARIO_VALUES, None)
    return True


def _mirror(key: str, value: Any) -> None:
    """Show the home's value in the widget about to be drawn (a new widget, or its home moved)."""
    if key not in st.session_state or st.session_state[key] != value:
        st.session_state[key] = value
