"""Scheduled upsert pipelines: a TOML config, one idempotent batch per run, metrics, maintenance.

``config`` (pure: parsing and validation) → ``runner`` (reads the batch, applies it to every target in
one lake transaction recording the batch id, measures, runs or advises maintenance) → ``metrics``.
The command line (``rowops.cli``) and ``spark_jobs/upsert_pipeline.py`` are thin layers on ``runner``.
"""

from rowops.pipeline.config import PipelineConfig, load_config, parse_config

__all__ = ["PipelineConfig", "load_config", "parse_config"]
