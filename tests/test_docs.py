"""The documents name only files that exist: a moved, renamed or deleted file cannot stay cited.

Documents: every `*.md` under docs/, bench/README.md and README.md.

A *path* is a whitespace-separated word of an inline code span (single backticks; fenced blocks
hold commands and examples and are not read), cut at `::` (`explorer/state.py::own_copy` names
the file), that

* contains a `/` and ends in .py, .md, .yaml, .yml, .csv, .json or .toml, or in `/` (a folder):
  `sim_core/engine/kernel.py`, `engine/kernel.py`, `explorer/`, `design/memory.md`; or
* has no `/` and ends in .py or .md (a bare module or document name, `kernel.py`): it must be
  the name of some file of the repository;

and is not a template, a URL or an example of hostile input: no `<`, `>`, `{`, `}`, `*`, `$` or
`:`, no `..` part, no leading `/` (`compute/<device>/...`, `/etc/shadow`, `../../x.csv`).

A path exists when it does relative to the repository root, to `sim_core/` (the map in
docs/architecture.md writes `engine/kernel.py`) or to the document's own folder (`design/app.md`
in docs/architecture.md), as Markdown resolves links. Relative Markdown link and image targets
(`[text](docs/security.md)`) must exist relative to the document's folder.

Files of other projects that the notes cite, and files the tools write, are in ELSEWHERE.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "bench" / "README.md", ROOT / "README.md"]

ELSEWHERE = {
    "vllm/core/scheduler.py",            # vLLM v0.6's V0 scheduler (docs/design/engine-schedulers.md)
    "vllm/v1/core/sched/scheduler.py",   # vLLM V1's scheduler
    "vllm/v1/core/sched/async_scheduler.py",   # its async-scheduling subclass
    "vllm/v1/core/kv_cache_manager.py",  # vLLM V1's KV-cache manager and block pool
    "vllm/v1/core/block_pool.py",
    "managers/scheduler.py",             # SGLang's python/sglang/srt/managers/scheduler.py
    "schedule_policy.py",                # SGLang's python/sglang/srt/managers/schedule_policy.py
    "bench/out/",                        # written by the benchmarks (git-ignored)
    "results/config.yaml",               # inference-perf's record of a run's settings (docs/accuracy.md)
    "runs/results.csv",                  # written by `python -m sim_core sweep --out runs/` (README)
}

FENCED = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`]+)`")   # a span may run over a line break
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
WITH_FOLDER = re.compile(r"/.*(\.(py|md|ya?ml|csv|json|toml)|/)$")
BARE_NAME = re.compile(r"^[\w.-]+\.(py|md)$")
NOT_A_PATH = re.compile(r"[<>{}*$:]|(^|/)\.\.(/|$)|^/")


def cited_paths(markdown: str) -> list[str]:
    """The paths (see the module docstring) in the inline code spans of a Markdown text, in order."""
    found = []
    for span in CODE_SPAN.findall(FENCED.sub("", markdown)):
        for word in span.split():
            word = word.split("::")[0]
            if not NOT_A_PATH.search(word) and (WITH_FOLDER.search(word) or BARE_NAME.match(word)):
                found.append(word)
    return found


def _repository_names() -> set[str]:
    """Names of the repository's files (hidden folders such as .venv and caches left out)."""
    return {path.name for path in ROOT.rglob("*")
            if path.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                          for part in path.relative_to(ROOT).parts[:-1])}


def missing_paths(markdown: str, folder: Path, names: set[str]) -> list[str]:
    """The cited paths of a document in `folder` that name nothing in the repository."""
    missing = []
    for path in cited_paths(markdown):
        if path in ELSEWHERE:
            continue
        if "/" not in path:
            exists = path in names
        else:
            candidates = [ROOT / path, ROOT / "sim_core" / path, folder / path]
            exists = any(c.is_dir() if path.endswith("/") else c.is_file() for c in candidates)
        if not exists:
            missing.append(path)
    return missing


def missing_links(markdown: str, folder: Path) -> list[str]:
    """Relative link and image targets of a document in `folder` that do not exist."""
    targets = [t.split("#")[0] for t in LINK.findall(FENCED.sub("", markdown))
               if not re.match(r"(https?|mailto):|#", t)]
    return [t for t in targets if t and not (folder / t).exists()]


def test_every_file_a_document_names_exists():
    """No document cites a repository path (in backticks, or as a link) that does not exist."""
    names = _repository_names()
    stale = {}
    for document in DOCUMENTS:
        text = document.read_text()
        bad = missing_paths(text, document.parent, names) + missing_links(text, document.parent)
        if bad:
            stale[str(document.relative_to(ROOT))] = bad
    assert stale == {}


def test_the_rule_catches_a_moved_file_and_lets_templates_and_other_projects_pass():
    """A stale path and a stale bare module name are caught; sim_core-relative and document-relative
    paths, templates, hostile examples and other projects' files pass."""
    text = ("The kernel (`sim_core/fastforward.py`, `engine/kernel.py`, `design/memory.md`) and "
            "`session_loop.py`; not `compute/<device>/mlp.csv`, `../../x.csv`, `/etc/shadow`, "
            "`vllm/v1/core/sched/scheduler.py`, `results.csv`.\n```\npython old/gone.py\n```\n"
            "See [the threat model](security.md) and [nothing](gone.md).")
    assert cited_paths(text) == ["sim_core/fastforward.py", "engine/kernel.py", "design/memory.md",
                                 "session_loop.py", "vllm/v1/core/sched/scheduler.py"]
    docs = ROOT / "docs"
    assert missing_paths(text, docs, {"kernel.py", "memory.md"}) == ["sim_core/fastforward.py", "session_loop.py"]
    assert missing_links(text, docs) == ["gone.md"]
