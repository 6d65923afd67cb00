"""OpenLineage run events (START, then COMPLETE or FAIL) for every row-level operation, append and
pipeline batch: the optional extra ``pip install rowops[lineage]`` (openlineage-python).

Events go where openlineage-python's own configuration says (``openlineage.yml``, ``OPENLINEAGE_URL``,
``OPENLINEAGE__TRANSPORT__...``, see its docs). rowops emits only when the package is installed and
one of those is set, and never with ``OPENLINEAGE_DISABLED=true``. The job is
``rowops.<verb>.<table>`` (a batch: ``rowops.pipeline.<pipeline id>``) in the namespace
``OPENLINEAGE_NAMESPACE`` (default ``rowops``); the datasets are the tables, named by identifier in the
lake's location, with the snapshot read (input) and written (output) as their ``version`` facet and the
rows and data files written as ``outputStatistics``. An operation inside a batch names the batch's run
as its ``parent``. Sending an event never fails an operation: a transport error is logged and dropped.
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import logging
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from rowops.meta.paths import normalize_path, to_uri

# openlineage-python (about 1 s to import) is loaded only once lineage is configured: an import inside
# the functions that send events, for an optional dependency, not to dodge an import circle
INSTALLED = importlib.util.find_spec("openlineage") is not None

LOG = logging.getLogger("rowops.lineage")
PRODUCER = "https://github.com/rowops/rowops"
_PARENT: contextvars.ContextVar[tuple[str, str, str] | None] = contextvars.ContextVar(
    "rowops_lineage_parent", default=None
)


@dataclass
class Outcome:
    """What the caller reports before the run completes: the snapshot written, rows and data files."""

    snapshot_id: int | None = None
    rows: int | None = None
    files: int | None = None
    read_snapshot_id: int | None = None  # the snapshot the inputs were read at


@dataclass(frozen=True)
class Dataset:
    """A table as lineage names it: the lake's location, the identifier, a snapshot (None: unknown)."""

    namespace: str
    name: str
    snapshot_id: int | None = None


def table_dataset(lake_location: str, name: str) -> Dataset:
    """A lake table as a dataset: the lake's location as a URI, the table's identifier.

    >>> table_dataset("/data/lake", "db.t").namespace, table_dataset("s3://b/lake", "db.t").namespace
    ('file:///data/lake', 's3://b/lake')
    """
    uri = to_uri(lake_location)
    return Dataset("file://" + normalize_path(uri) if uri.startswith("file:") else uri, name)


def path_dataset(path: str) -> Dataset:
    """Files at ``path`` as OpenLineage names them: namespace ``file`` and the absolute path (local), or
    ``scheme://bucket`` and the key (object stores; ``s3a`` / ``s3n`` are ``s3``).

    >>> path_dataset("s3a://b/in/batch-1"), path_dataset("gs://b/in")
    (Dataset(namespace='s3://b', name='/in/batch-1', snapshot_id=None), Dataset(namespace='gs://b', name='/in', snapshot_id=None))
    >>> path_dataset("/data/batch-1").name, path_dataset("file:///data/b").name, path_dataset("rel/b").name[0]
    ('/data/batch-1', '/data/b', '/')
    """
    if "://" in path and not path.startswith("file:"):
        scheme, _, rest = path.partition("://")
        bucket, _, key = rest.partition("/")
        return Dataset(f"{'s3' if scheme in ('s3a', 's3n') else scheme}://{bucket}", "/" + key)
    return Dataset("file", normalize_path(path) if path.startswith("file:") else os.path.abspath(path))


def enabled() -> bool:
    """Whether events are sent: the extra is installed, configured, and not disabled."""
    if not INSTALLED or os.environ.get("OPENLINEAGE_DISABLED", "").lower() == "true":
        return False
    configured = any(
        k == "OPENLINEAGE_URL" or k.startswith(("OPENLINEAGE__", "OPENLINEAGE_CONFIG")) for k in os.environ
    )
    return configured or Path("openlineage.yml").exists()


@contextmanager
def lineage_run(job: str, inputs: list[Dataset], outputs: list[Dataset]) -> Iterator[Outcome]:
    """Emit START now, COMPLETE when the block ends (with what it put in the yielded ``Outcome``) or FAIL
    with the error if it raises; runs started inside name this one as their parent."""
    outcome = Outcome()
    client = _client() if enabled() else None
    if client is None:
        yield outcome
        return
    from openlineage.client.event_v2 import Job, Run, RunState
    from openlineage.client.facet_v2 import parent_run
    from openlineage.client.uuid import generate_new_uuid

    run_id, namespace = str(generate_new_uuid()), os.environ.get("OPENLINEAGE_NAMESPACE", "rowops")
    parent = _PARENT.get()
    facets: dict[str, Any] = {}
    if parent is not None:
        run = parent_run.Run(runId=parent[0])
        facets["parent"] = parent_run.ParentRunFacet(run=run, job=parent_run.Job(parent[1], parent[2]))
    event = _Events(client, Run(runId=run_id, facets=facets), Job(namespace=namespace, name=job))
    event.send(RunState.START, inputs, outputs)
    token = _PARENT.set((run_id, namespace, job))
    try:
        yield outcome
    except BaseException as exc:
        event.fail(exc, inputs, outputs)
        raise
    finally:
        _PARENT.reset(token)
    read = [Dataset(d.namespace, d.name, d.snapshot_id or outcome.read_snapshot_id) for d in inputs]
    written = [Dataset(d.namespace, d.name, outcome.snapshot_id) for d in outputs]
    event.send(RunState.COMPLETE, read, written, outcome)


def _client() -> Any:
    """openlineage-python's client as its configuration says; None (logged) when that configuration
    cannot make one (an unknown transport, say): lineage never fails the operation it describes."""
    from openlineage.client import OpenLineageClient

    try:
        return OpenLineageClient()
    except Exception:
        LOG.warning("OpenLineage is configured but its client could not be made: no events", exc_info=True)
        return None


@dataclass
class _Events:
    client: Any
    run: Any
    job: Any

    def send(
        self, state: Any, inputs: list[Dataset], outputs: list[Dataset], done: Outcome | None = None
    ) -> None:
        from openlineage.client.event_v2 import InputDataset, RunEvent

        event = RunEvent(
            eventType=state,
            eventTime=datetime.now(timezone.utc).isoformat(),
            run=self.run,
            job=self.job,
            producer=f"{PRODUCER}/{_version()}",
            inputs=[InputDataset(d.namespace, d.name, facets=_version_facet(d)) for d in inputs],
            outputs=[_output(d, done) for d in outputs],
        )
        try:
            self.client.emit(event)
        except Exception:  # lineage must never fail the operation it describes
            LOG.warning("could not send the OpenLineage %s event of %s", state, self.job.name, exc_info=True)

    def fail(self, exc: BaseException, inputs: list[Dataset], outputs: list[Dataset]) -> None:
        from openlineage.client.event_v2 import Run, RunState
        from openlineage.client.facet_v2 import error_message_run

        stack = "".join(traceback.format_exception(exc))
        error = error_message_run.ErrorMessageRunFacet(str(exc), "python", stack)
        self.run = Run(runId=self.run.runId, facets={**self.run.facets, "errorMessage": error})
        self.send(RunState.FAIL, inputs, outputs)


def _version_facet(d: Dataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import dataset_version_dataset

    if d.snapshot_id is None:
        return {}
    return {"version": dataset_version_dataset.DatasetVersionDatasetFacet(str(d.snapshot_id))}


def _output(d: Dataset, done: Outcome | None) -> Any:
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import output_statistics_output_dataset

    stats: dict[str, Any] = {}
    if done is not None and (done.rows is not None or done.files is not None):
        facet = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            done.rows, None, done.files
        )
        stats["outputStatistics"] = facet
    return OutputDataset(d.namespace, d.name, facets=_version_facet(d), outputFacets=stats)


@functools.cache
def _version() -> str:
    try:
        return metadata.version("rowops")
    except metadata.PackageNotFoundError:
        return "dev"
