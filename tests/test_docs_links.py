"""The documentation's links resolve inside the repository, and the README stays a front page.

Every markdown link `[text](target)` in README.md, docs/*.md and benchmarks/*.md that is not
http(s), mailto or a bare `#anchor` must name a file or folder that exists relative to the
file holding the link (a link that leaves the repository, like `../shared/...`, is broken in a
clone). Where such a link carries `#anchor` into a markdown file, or a bare `#anchor` points
into its own file, that file must have a heading with that anchor (GitHub's rule: lower case,
punctuation dropped, spaces to hyphens). No torch needed.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]+`")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
README_LIMIT = 20_000


def _prose(path):
    """The file's text without fenced code blocks (their brackets are code, not links)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _anchors(path):
    seen, out = {}, set()
    for line in _prose(path).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path):
    """Link targets outside code (a span like `x[0](y)` is code, and `[`a`](b)` keeps its link)."""
    return [m.group(1) for m in LINK.finditer(CODE_SPAN.sub("", _prose(path)))]


def test_the_files_are_there():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "docs/design.md", "docs/usage.md"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(path):
    bad = []
    for target in _links(path):
        if re.match(r"(https?:|mailto:)", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / file_part).resolve()
        if file_part:
            try:
                dest.relative_to(ROOT)
            except ValueError:
                bad.append(f"{target}: leaves the repository")
                continue
            if not dest.exists():
                bad.append(f"{target}: no such file")
                continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not bad, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(bad)


def test_readme_is_a_front_page():
    size = (ROOT / "README.md").stat().st_size
    assert size < README_LIMIT, f"README.md is {size} bytes; keep it under {README_LIMIT} (details go in docs/)"
