"""README.md is what every new user meets: its two commands are exactly what CI runs, and
every Python snippet in it runs as written."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _blocks(lang):
    return [m.group(1) for m in re.finditer(r"^```" + lang + r"\n(.*?)^```", README,
                                            re.S | re.M)]


def test_readme_starts_with_the_two_commands():
    bash = _blocks("bash")
    assert len(bash) >= 2
    first, second = (b.strip() for b in bash[:2])
    assert "pip install -q -e . " in first and first.endswith("python -m dynshape demo")
    assert '[test]' not in first, "the demo command must install no extras"
    assert '".[test]"' in second and "pytest" in second
    head = README[:README.index(bash[1]) + len(bash[1])]
    assert head.count("```bash") == 2, "the two commands come first"


def test_ci_runs_both_readme_commands_verbatim_in_fresh_environments():
    first, second = (b.strip() for b in _blocks("bash")[:2])
    lines = [ln.strip() for ln in CI.splitlines()]
    assert first in lines and second in lines, ".ci/run must run README's commands verbatim"
    i, j = lines.index(first), lines.index(second)
    assert i < j, "the demo runs first, then the tests"
    # each runs after a fresh virtual environment and an empty Numba cache
    fresh_calls = [k for k, ln in enumerate(lines) if ln == "fresh"]
    assert any(k < i for k in fresh_calls) and any(i < k < j for k in fresh_calls)
    body = CI[CI.index("fresh() {"):CI.index("}", CI.index("fresh() {"))]
    assert "rm -rf .venv" in body and "mktemp -d" in body and "NUMBA_CACHE_DIR" in body
    assert "set -euo pipefail" in CI


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_snippet_runs_as_written(index, capsys):
    code = _blocks("python")[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "readme"})
