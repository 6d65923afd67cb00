"""``rowops pipeline run|validate`` and ``rowops explain``: scheduled upsert pipelines."""

from __future__ import annotations

from typing import Annotated

import typer

from rowops.cli.app import Context, app, guarded, pipeline_app, pipeline_lake
from rowops.pipeline import runner


# -- pipelines -------------------------------------------------------------------------------------
@pipeline_app.command("run")
def pipeline_run(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id", help="Overrides [pipeline].batch_id.")] = None,
) -> None:
    """Run one batch (a batch committed before is skipped: exit code 0)."""

    def action(state: Context) -> None:
        parsed, lake = pipeline_lake(state, config)
        with state.progress(runner.steps(parsed)) as progress:
            metrics = runner.run(lake, parsed, batch_id, progress)
        state.emit(metrics.to_dict(), metrics.log_lines)

    guarded(ctx, action)


@pipeline_app.command("validate")
def pipeline_validate(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id")] = None,
) -> None:
    """Check the config, the batch's source (schema, operation codes) and the targets; writes nothing."""

    def action(state: Context) -> None:
        parsed, lake = pipeline_lake(state, config)
        metrics = runner.validate(lake, parsed, batch_id)
        state.emit(metrics.to_dict(), lambda: [f"{config}: valid", *metrics.log_lines()[1:]])

    guarded(ctx, action)


@app.command("explain")
def explain(
    ctx: typer.Context,
    config: Annotated[str, typer.Argument(help="The pipeline's TOML file.")],
    batch_id: Annotated[str | None, typer.Option("--batch-id")] = None,
) -> None:
    """The plan of each target's MERGE for a batch (strategy and why, files, join); writes nothing."""

    def action(state: Context) -> None:
        parsed, lake = pipeline_lake(state, config)
        plans = runner.explain(lake, parsed, batch_id)
        state.emit(plans, lambda: [f"-- {name}\n{plan}" for name, plan in plans.items()])

    guarded(ctx, action)
