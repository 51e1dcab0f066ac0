"""Text from input renders as itself: no links, images, icons, styling, or unbounded lines.
(tests/test_browser_security.py checks the same in a real browser.)"""

from app_helpers import unescaped

from explorer.safe_text import WORD_JOINER, plain, shorten

PHISH = "[Session expired, sign in](https://evil.example/login) ![x](https://evil.example/p.png)"


def test_a_markdown_link_and_image_become_literal_text():
    """Every bracket and parenthesis is escaped, and the URL's scheme is broken for autolinks."""
    shown = plain(PHISH)
    assert shown == ("\\[Session expired, sign in\\]\\(https:" + WORD_JOINER + "//evil\\.example/login\\) "
                     "\\!\\[x\\]\\(https:" + WORD_JOINER + "//evil\\.example/p\\.png\\)")
    assert unescaped(shown) == PHISH


def test_bare_urls_emails_and_www_cannot_autolink():
    shown = plain("see https://a.example www.b.example me@c.example")
    assert "https:" + WORD_JOINER + "//" in shown and "w" + WORD_JOINER + "ww" in shown
    assert "me" + WORD_JOINER + "@c" in shown


def test_streamlit_directives_and_math_are_broken():
    """`:material/x:`, `:red[...]`, emoji shortcodes and `$...$` show as typed."""
    shown = plain(":material/lock: :red[alert] :smile: $x^2$")
    assert shown.startswith(":" + WORD_JOINER + "material/lock: ")
    assert "\\[alert\\]" in shown and "\\$x\\^2\\$" in shown
    assert unescaped(shown) == ":material/lock: :red[alert] :smile: $x^2$"


def test_ordinary_messages_keep_their_characters_apart_from_escapes():
    """A colon before a space or a digit gets no joiner, so messages stay searchable."""
    assert plain("bad.csv: row 2 (line 3) at 12:30") == "bad\\.csv: row 2 \\(line 3\\) at 12:30"


def test_text_is_one_line_and_bounded():
    """Newlines fold to spaces; a 100,000-character name is cut to the limit with an ellipsis."""
    assert plain("a\n# heading\n\n- item") == "a \\# heading \\- item"
    long = plain("n" * 100_000, limit=80)
    assert len(long) == 80 and long.endswith("…")
    assert shorten("x " * 10, limit=5) == "x x …"
