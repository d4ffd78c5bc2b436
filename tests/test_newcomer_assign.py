"""Grants given from a subdirectory: read from the root, as the SPEC says, with a warning
when a same-named file exists elsewhere, and advice that points the right way."""

from __future__ import annotations

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo, numbered

FILES = {"src/pkg/url_safe.py": numbered(30), "src/pkg/other.py": "x\n", "README": "r\n"}


def test_a_grant_matching_nothing_warns_of_the_same_named_file(coord: Cli,
                                                                make_repo: MakeRepo) -> None:
    repo = make_repo(FILES)
    r = coord(repo / "src" / "pkg", "assign", "t1", "--title", "T", "--expect", "E",
              "--write", "url_safe.py")
    doc = ok(r)
    assert doc["task"]["grants"] == ["url_safe.py"]  # from the root, as the SPEC says
    warning = next(w for w in doc["warnings"] if "matches no file" in w)
    assert "src/pkg/url_safe.py" in warning and "src/pkg/ where you are" in warning
    assert "src/pkg/url_safe.py" in r.stderr


def test_a_new_file_with_no_namesake_is_granted_quietly(coord: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo(FILES)
    doc = ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write",
                   "src/pkg/brand_new.py", "--write", "src/pkg/url_safe.py"))
    assert doc["warnings"] == []


def test_a_range_of_a_missing_file_points_at_the_namesake(coord: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo(FILES)
    r = coord(repo / "src" / "pkg", "assign", "t1", "--title", "T", "--expect", "E",
              "--write", "url_safe.py:10-20")
    assert r.code == 2
    msg = error_message(r)
    assert "did you mean src/pkg/url_safe.py:10-20?" in msg
    assert "grant the path itself" not in msg
    r = coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "nowhere.py:1-2")
    msg = error_message(r)
    assert r.code == 2 and "grant the whole path (nowhere.py, no line range)" in msg


def test_grant_warns_too(coord: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo(FILES)
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "README"))
    doc = ok(coord(repo, "grant", "t1", "--write", "other.py"))
    assert any("src/pkg/other.py" in w for w in doc["warnings"])
