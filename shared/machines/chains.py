"""The records machines exchange through their git remote, and where they live: ref names
(each machine's chain and its generations, the fetched copies), the limits and names an
untrusted record must meet, the JSON files a sync keeps, the mirror of the authority's
tasks, and the tree plumbing records are read and written with. shared/machines/sync.py publishes,
pushes and fetches them; shared/machines/remote.py applies what other machines sent."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from hunkwise.shared import git
from hunkwise.shared.errors import UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import AppliedDoc, Mirror, QuarantinedRecord

OWN = "refs/hunkwise/m"
SEEN = "refs/hunkwise/remote"
MAX_RECORD_BYTES = 16 * 1024 * 1024
# Finished tasks stay in the published table this long, so other machines see the outcome.
KEEP_FINISHED_S = 7 * 86400
# Reports older than this leave the published tree (their objects stay in the chain's
# history until the chain is compacted; see README "Across machines").
KEEP_REPORTS_S = 14 * 86400
REPORT_NAME_RE = re.compile(r"^(?P<t>\d{1,20})\.P\d+R[0-9a-f]+\.[A-Za-z0-9_.-]+,"
                             r"task=(?P<task>[A-Za-z0-9_.-]{1,64}),rev=(?P<rev>\d{1,9})$")
KEY_RE = re.compile(r"^[A-Za-z0-9_.@|-]{1,300}$")


_GEN_RE = re.compile(r"^records(?:-(?P<n>[1-9][0-9]{0,8}))?$")


def gen_ref(prefix: str, machine: str, gen: int) -> str:
    return f"{prefix}/{machine}/records" + (f"-{gen}" if gen else "")


def chain_refs(repo: Path, machine: str) -> dict[str, str]:
    """{ref: commit} of a machine's chain refs, its own and the fetched copies, listed by one
    `for-each-ref`."""
    return git.list_refs(repo, f"{OWN}/{machine}/", f"{SEEN}/{machine}/")


def generations(repo: Path, prefix: str, machine: str,
                refs: dict[str, str] | None = None) -> dict[int, str]:
    """{generation: commit} of a machine's chain refs under `prefix` (own or seen), from
    `refs` (chain_refs) when given."""
    found: dict[int, str] = {}
    for name, oid in (chain_refs(repo, machine) if refs is None else refs).items():
        m = _GEN_RE.fullmatch(name.rpartition("/")[2])
        if m and name.rpartition("/")[0] == f"{prefix}/{machine}":
            found[int(m["n"] or 0)] = oid
    return found


def gen_number(ref: str) -> int:
    m = _GEN_RE.fullmatch(ref.rpartition("/")[2])
    return int(m["n"] or 0) if m else 0


def own_ref(machine: str, repo: Path | None = None, refs: dict[str, str] | None = None) -> str:
    """This machine's chain ref: the highest generation it or the remote holds."""
    if repo is None:
        return gen_ref(OWN, machine, 0)
    refs = chain_refs(repo, machine) if refs is None else refs
    gens = set(generations(repo, OWN, machine, refs)) | set(generations(repo, SEEN, machine, refs))
    return gen_ref(OWN, machine, max(gens, default=0))


def machine_of(who: str | None) -> str | None:
    """The machine a session id or `<role>@<machine>` names (None when it names none)."""
    if not who or "@" not in who:
        return None
    return who.rpartition("@")[2]


# ---- local bookkeeping ---------------------------------------------------------------------

def sync_dir(ctx: Ctx) -> Path:
    d = ctx.lay.root / "sync"
    d.mkdir(parents=True, exist_ok=True)
    return d


def load_json(path: Path) -> Any:
    """A bookkeeping file as read: a JSON object, or {} when missing or unreadable. Its
    shape is the one its caller annotates (only this code writes these files)."""
    try:
        doc = store.strict_json_loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # our own bookkeeping, rebuilt from the refs at the next sync
    return doc if isinstance(doc, dict) else {}


def save_json(path: Path, doc: Mapping[str, object]) -> None:
    store.atomic_write(path, json.dumps(doc, indent=1, sort_keys=True).encode())


def mirror(ctx: Ctx) -> Mirror:
    """`{"tasks": {id: machine}, "ranges_at": {machine: commit}}`: tasks this machine holds
    only as a copy of another machine's published table."""
    doc: Mirror = load_json(ctx.lay.root / "sync" / "mirror.json")
    doc.setdefault("tasks", {})
    doc.setdefault("ranges_at", {})
    return doc


def is_mirrored(ctx: Ctx, task_id: str) -> bool:
    return task_id in mirror(ctx)["tasks"]


# ---- git objects ---------------------------------------------------------------------------

Nested: TypeAlias = dict[str, "tuple[str, str] | Nested"]  # {name: (mode, oid) or a subtree's Nested}


def plan_tree(repo: Path, entries: Nested) -> tuple[str, list[git.TreeEntries]]:
    """The id of the tree of {name: (mode, oid) or {...}} (a dict is a subtree; mode 040000
    entries name existing trees), and its levels to write, innermost first: nothing is
    written yet."""
    trees: list[git.TreeEntries] = []

    def level(node: Nested) -> str:
        flat = {name: ("040000", level(sub)) if isinstance(sub, dict) else sub
                for name, sub in node.items()}
        trees.append(flat)
        return objects.tree_id(repo, flat)

    return level(entries), trees


def mktree(repo: Path, entries: Nested) -> str:
    """plan_tree's tree, written: one `mktree --batch` writes every level."""
    root, trees = plan_tree(repo, entries)
    objects.make_trees(repo, trees)
    return root


def ls_tree(repo: Path, treeish: str) -> dict[str, tuple[str, str]]:
    """{name: (mode, oid)} of one tree level; empty when it does not exist."""
    try:
        return git.read_tree(repo, treeish) or {}
    except UsageError:
        return {}  # a name no object can have


def has_object(repo: Path, oid: str | None) -> bool:
    if not oid:
        return False
    try:
        return git.read_objects(repo, [oid])[0] is not None
    except UsageError:
        return False


def read_ref(repo: Path, ref: str) -> str | None:
    found = git.read_objects(repo, [ref + "^{commit}"])[0]
    return found[0] if found is not None and found[1] == "commit" else None


def dump_json(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode()


# ---- publish -------------------------------------------------------------------------------


@dataclass
class Applied:
    """What one sync applied of the other machines' chains, by kind (`coord sync`'s
    `applied`)."""

    signals: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    works: list[str] = field(default_factory=list)
    quarantined: list[QuarantinedRecord] = field(default_factory=list)

    def public(self) -> AppliedDoc:
        return {"signals": self.signals, "verdicts": self.verdicts, "tasks": self.tasks,
                "checkpoints": self.checkpoints, "reports": self.reports,
                "claims": self.claims, "works": self.works, "quarantined": self.quarantined}
