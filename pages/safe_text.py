"""Text from input (names, ids, values, file content, error messages) made safe to display.

Streamlit renders the text of `st.error`, `st.caption`, `st.markdown`... as Markdown with its
own extensions: `[x](url)` links, `![x](url)` images that the browser fetches, bare URLs,
`www.` and e-mail addresses turned into links, `:material/icon:` and `:red[...]` directives,
`$...$` math. `plain()` escapes every Markdown punctuation mark and puts an invisible word
joiner (U+2060) where the link and directive detectors look (after `:`, before `@`, inside
`www`), so input shows as the characters it is; it also folds whitespace to one line and cuts
it to a bounded length. Plotly text takes HTML: `plain_html()`.
"""

from __future__ import annotations

import html
import re

MAX_CHARS = 200
WORD_JOINER = "\u2060"
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&=^\"'])")
_WWW = re.compile(r"(?i)(w)(ww)")


def shorten(text: object, limit: int = MAX_CHARS) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis marks a cut)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def plain(text: object, limit: int = MAX_CHARS) -> str:
    """Markdown that renders as the literal (shortened) text: no links, images, icons or styling."""
    escaped = _MARKDOWN_PUNCTUATION.sub(r"\\\1", shorten(text, limit))
    escaped = escaped.replace(":", ":" + WORD_JOINER).replace("@", WORD_JOINER + "@")
    return _WWW.sub(r"\1" + WORD_JOINER + r"\2", escaped)


def plain_html(text: object, limit: int = MAX_CHARS) -> str:
    """HTML-escaped (shortened) text for plotly titles, labels and hover text."""
    return html.escape(shorten(text, limit))
