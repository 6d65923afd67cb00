"""``rowops compact|expire-snapshots|remove-orphans|cleanup|rewrite-manifests|verify``: maintenance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any

import typer

from rowops.cli.app import EXIT_FAILURE, Context, app, guarded
from rowops.cli.text import (
    parse_duration,
)


# -- maintenance -----------------------------------------------------------------------------------
def _maintain(ctx: typer.Context, table: str, call: Callable[[Any], Any]) -> None:
    def action(state: Context) -> None:
        handle = state.lake().table(table)
        with state.progress() as progress:
            progress(f"maintaining {table}")
            result = call(handle)
        doc = {"table": table, **result.to_dict()}
        counts = {k: v for k, v in result.to_dict().items() if k != "paths"}
        paths = list(getattr(result, "paths", ()))
        state.emit(doc, lambda: [f"{table}: " + ", ".join(f"{k}={v}" for k, v in counts.items()), *paths])

    guarded(ctx, action)


@app.command("compact")
def compact(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    where: Annotated[str | None, typer.Option(help="Only files of partitions matching this filter.")] = None,
    max_bytes: Annotated[int | None, typer.Option(help="Budget: data bytes rewritten at most.")] = None,
    target_file_size: Annotated[int | None, typer.Option(help="Bytes per output file.")] = None,
) -> None:
    """Rewrite data files with their deletes applied, bin-packed and sorted (rows unchanged)."""
    _maintain(
        ctx, table, lambda t: t.compact(where=where, max_bytes=max_bytes, target_file_size=target_file_size)
    )


@app.command("expire-snapshots")
def expire_snapshots(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    older_than: Annotated[
        str | None,
        typer.Option(help="Age like 7d, 12h, 0s (default: history.expire.max-snapshot-age-ms, 5 days)."),
    ] = None,
    retain_last: Annotated[
        int | None,
        typer.Option(help="Snapshots always kept (default: history.expire.min-snapshots-to-keep, 1)."),
    ] = None,
) -> None:
    """Expire old snapshots (never the current one, nor one a tag or an offered lake version needs)."""
    age = parse_duration(older_than) if older_than else None
    _maintain(ctx, table, lambda t: t.expire_snapshots(older_than=age, retain_last=retain_last))


@app.command("remove-orphans")
def remove_orphans(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="namespace.table")],
    older_than: Annotated[str, typer.Option(help="Safety age of removed files.")] = "3d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files; delete nothing.")] = False,
) -> None:
    """Remove files of the table that no snapshot references (older than the safety age)."""
    age = parse_duration(older_than)
    _maintain(ctx, table, lambda t: t.remove_orphans(older_than=age, dry_run=dry_run))


@app.command("cleanup")
def cleanup(
    ctx: typer.Context,
    older_than: Annotated[str, typer.Option(help="Safety age of removed files.")] = "3d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files; delete nothing.")] = False,
) -> None:
    """Remove files no lake version references from the lake's own tables (older than the safety age)."""
    age = parse_duration(older_than)

    def action(state: Context) -> None:
        result = state.lake().cleanup(older_than=age, dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        state.emit(
            asdict(result),
            lambda: [
                f"{verb} {result.orphans_removed} files ({result.bytes_removed} bytes)",
                *result.removed,
            ],
        )

    guarded(ctx, action)


@app.command("rewrite-manifests")
def rewrite_manifests(
    ctx: typer.Context, table: Annotated[str, typer.Argument(help="namespace.table")]
) -> None:
    """Merge the table's small manifests into target-size ones (metadata only; rows unchanged)."""
    _maintain(ctx, table, lambda t: t.rewrite_manifests())


@app.command("verify")
def verify(ctx: typer.Context) -> None:
    """Check every lake version, ref and snapshot: metadata, files, sizes, sequence numbers, row counts.
    Exit 0 when clean, 1 with the problems listed."""

    def action(state: Context) -> None:
        result = state.lake().verify()
        document = {
            "ok": result.ok,
            "versions": result.versions,
            "problems": [asdict(p) for p in result.problems],
            "refused": [list(r) for r in result.refused],
        }
        state.emit(document, result.lines)
        if not result.ok:
            raise typer.Exit(EXIT_FAILURE)

    guarded(ctx, action)
