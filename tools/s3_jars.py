"""Provide the jars that let a local Spark 3.5 read and write ``s3a://`` paths (tests only).

rowops adds no jars: on real clusters the platform provides Hadoop's S3A connector. For the tests
here, the only installable source of ``hadoop-aws`` and the AWS SDK bundle is the
``sagemaker-pyspark`` 1.4.5 *source* distribution on PyPI (hadoop-aws 3.3.1,
aws-java-sdk-bundle 1.11.901; pyspark 3.5 ships a Hadoop 3.3.4 client: a slight mismatch that
reads and writes Parquet fine). The sdist is downloaded with pip (not installed: it pins pyspark
3.3) and the two jars are extracted. No Maven.

Usage::

    python tools/s3_jars.py [OUT_DIR]      # prints the two jar paths
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST = "sagemaker-pyspark==1.4.5"
JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
DEFAULT_OUT_DIR = (
    Path(__file__).resolve().parents[1] / ".venv" / "s3-jars"
)  # shared by .venv4 and the Connect server


def s3_jars(out_dir: Path = DEFAULT_OUT_DIR) -> list[str]:
    """The two jar paths, downloading and extracting them on first use."""
    paths = [out_dir / name for name in JARS]
    if all(p.is_file() for p in paths):
        return [str(p) for p in paths]
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                SDIST,
                "-d",
                tmp,
            ],
            check=True,
        )
        sdist = next(Path(tmp).glob("sagemaker_pyspark-*.tar.gz"))
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                name = Path(member.name).name
                if name in JARS and "/deps/jars/" in member.name:
                    source = archive.extractfile(member)
                    assert source is not None
                    partial = out_dir / f".{name}.part"
                    partial.write_bytes(source.read())
                    partial.replace(out_dir / name)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{SDIST} did not contain {missing}")
    return [str(p) for p in paths]


# Hadoop 3.4+ clients (Spark 4.x) give some S3A settings defaults with units ("60s") and a default
# credential chain of AWS SDK v2 classes; hadoop-aws 3.3.1 parses plain numbers and ships SDK v1. With
# these settings the old connector runs on the newer client (tests only: real clusters match versions).
LEGACY_CONNECTOR_CONF = {
    "spark.hadoop.fs.s3a.connection.establish.timeout": "30000",
    "spark.hadoop.fs.s3a.connection.timeout": "200000",
    "spark.hadoop.fs.s3a.connection.ttl": "300000",
    "spark.hadoop.fs.s3a.threads.keepalivetime": "60",
    "spark.hadoop.fs.s3a.multipart.purge.age": "86400",
    "spark.hadoop.fs.s3a.assumed.role.session.duration": "1800",
    "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
}


def available(out_dir: Path = DEFAULT_OUT_DIR) -> list[str] | None:
    """The jar paths if they are extracted already (never downloads)."""
    paths = [out_dir / name for name in JARS]
    return [str(p) for p in paths] if all(p.is_file() for p in paths) else None


def session_conf(pyspark_version: str, out_dir: Path = DEFAULT_OUT_DIR) -> dict[str, str]:
    """Settings that put the extracted jars on a test session's class path (none if not extracted),
    with :data:`LEGACY_CONNECTOR_CONF` on Spark 4.x."""
    jars = available(out_dir)
    if not jars:
        return {}
    legacy = LEGACY_CONNECTOR_CONF if not pyspark_version.startswith("3.") else {}
    return {"spark.jars": ",".join(jars), **legacy}


if __name__ == "__main__":
    print("\n".join(s3_jars(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT_DIR)))
