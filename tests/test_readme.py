"""The README's two set-up commands exist, and CI runs exactly the README's test command."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return [block.split("```", 1)[0].strip() for block in text.split("```bash\n")[1:]]


def test_readme_has_an_app_command_and_a_test_command_that_ci_runs():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    app, tests = blocks[0], blocks[1]
    assert "pip install -r requirements.txt" in app and app.endswith("streamlit run app.py")
    assert "requirements-dev.txt" in tests and "pytest" in tests
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci_lines
    images = re.findall(r"!\[[^\]]*\]\((assets/[^)]+\.png)\)", (ROOT / "README.md").read_text())
    assert len(images) >= 4
    assert all((ROOT / image).stat().st_size > 10_000 for image in images)
