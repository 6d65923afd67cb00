"""Which delete files maintenance may drop or must carry over, through the shared delete index.

:class:`rowops.meta.delete_index.DeleteIndex` finds the deletes of a data file by dictionaries and
bisection (never files x deletes); here: the delete files left dangling by removed data files, and the
closure of data files whose position delete files a rewrite replaces.
"""

from __future__ import annotations

import bisect

from rowops.meta.delete_index import DeleteIndex, dangling_equality_deletes
from rowops.meta.files import TableFiles


def dangling_deletes(files: TableFiles, removed_data: set[str]) -> set[str]:
    """Delete files that apply to no data file once ``removed_data`` is gone (linear).

    A position delete dangles when no kept data file is among those it may name; an equality delete
    when no kept data file of its partition (any partition, for a global one) is older than it.
    """
    kept = [f for f in files.data if f.path not in removed_data]
    kept_paths = sorted(f.path for f in kept)
    kept_set = set(kept_paths)
    dangling = set()
    for d in files.position_deletes:
        bounds = d.referenced_paths
        if bounds is None:
            named = bool(kept_paths)
        elif bounds[0] == bounds[1]:
            named = bounds[0] in kept_set
        else:
            at = bisect.bisect_left(kept_paths, bounds[0])
            named = at < len(kept_paths) and kept_paths[at] <= bounds[1]
        if not named:
            dangling.add(d.path)
    return dangling | dangling_equality_deletes(files, removed_data)


def covered_targets(index: DeleteIndex, start: set[str]) -> tuple[set[str], set[str]]:
    """The data files to give one new position-delete file each, and the position-delete files that
    those new files replace.

    Starting from ``start``, every position-delete file that applies to a target is replaced, so every
    data file it names becomes a target too (its new file must carry those positions): a closure.
    """
    targets, replaced = set(), set()
    todo = list(start)
    while todo:
        path = todo.pop()
        if path in targets:
            continue
        targets.add(path)
        for d in index.pos_by_data.get(path, []):
            if d.path not in replaced:
                replaced.add(d.path)
                todo.extend(p for p in index.data_by_pos[d.path] if p not in targets)
    return targets, replaced
