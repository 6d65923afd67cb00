"""Provide the jars that let a local Spark 3.5 read Iceberg tables, fully offline.

The ``snowpark-connect-deps-iceberg`` wheel ships ``iceberg-spark-runtime-3.5_2.12-1.10.2.jar``
without its shaded Jackson classes (``org.apache.iceberg.shaded.com.fasterxml.jackson.*``), so
every catalog operation fails with ``ClassNotFoundException ...JsonFactoryBuilder``.  This module
rebuilds the missing classes by relocating pyspark's own Jackson jars (core, databind, annotations,
datatype-jsr310) the way maven-shade does: every class is renamed and every UTF8 entry of its
constant pool is rewritten from ``com/fasterxml/jackson/`` (and the dotted form) to the shaded
prefix.  The output is rebuilt only when older than its inputs.  No Maven, no network.

Usage::

    python tools/iceberg_jars.py [OUT_DIR]      # prints the two jar paths

or ``from tools.iceberg_jars import iceberg_jars`` and put the result on ``spark.jars``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
RUNTIME_DIST = "snowpark-connect-deps-iceberg"
# jsr310 is referenced by the runtime's shaded Arrow (ObjectMapperFactory), so it is relocated too.
JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")
DEFAULT_OUT_DIR = Path(sys.prefix) / "iceberg-jars"

_SHADE_PREFIX = b"org/apache/iceberg/shaded/"
_RULES = (
    (b"com/fasterxml/jackson/", _SHADE_PREFIX + b"com/fasterxml/jackson/"),
    (b"com.fasterxml.jackson.", _SHADE_PREFIX.replace(b"/", b".") + b"com.fasterxml.jackson."),
)
# Byte size (tag included) of the fixed-size constant-pool entries; tag 1 (UTF8) is variable-length.
_CP_TAGS_BY_SIZE = {
    3: (7, 8, 16, 19, 20),  # Class, String, MethodType, Module, Package
    4: (15,),  # MethodHandle
    5: (3, 4, 9, 10, 11, 12, 17, 18),  # Integer, Float, *ref, NameAndType, Dynamic, InvokeDynamic
    9: (5, 6),  # Long, Double (each takes two pool slots)
}
_CP_SIZES = {tag: size for size, tags in _CP_TAGS_BY_SIZE.items() for tag in tags}
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed entry timestamps -> reproducible output


def find_runtime_jar() -> Path:
    """Return the Iceberg Spark runtime jar installed by the ``snowpark-connect-deps-iceberg`` wheel."""
    try:
        dist = importlib.metadata.distribution(RUNTIME_DIST)
        for rel in dist.files or ():
            if rel.name == RUNTIME_JAR:
                path = Path(str(dist.locate_file(rel)))
                if path.is_file():
                    return path
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("snowpark_connect_deps_iceberg")
    roots = [Path(p) for p in spec.submodule_search_locations or ()] if spec else []
    roots += [Path(p) for p in sys.path if p.endswith("site-packages")]
    for root in roots:
        for path in root.rglob(RUNTIME_JAR):
            return path
    raise FileNotFoundError(f"{RUNTIME_JAR} not found; is {RUNTIME_DIST} installed in {sys.prefix}?")


def find_jackson_jars() -> list[Path]:
    """Return pyspark's jars for ``JACKSON_ARTIFACTS`` (all must share one version)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("pyspark is not installed")
    jars_dir = Path(spec.origin).parent / "jars"
    found = []
    for artifact in JACKSON_ARTIFACTS:
        matches = [p for p in jars_dir.glob(f"{artifact}-*.jar") if p.stem[len(artifact) + 1 :][:1].isdigit()]
        if len(matches) != 1:
            raise FileNotFoundError(f"expected one {artifact}-<version>.jar in {jars_dir}, found {matches}")
        found.append(matches[0])
    versions = {_jar_version(p) for p in found}
    if len(versions) != 1:
        raise RuntimeError(f"Jackson jars disagree on version: {[p.name for p in found]}")
    return found


def _jar_version(jar: Path) -> str:
    return jar.stem.rsplit("-", 1)[1]


def relocate(data: bytes) -> bytes:
    """Apply the Jackson relocation rules to a name, descriptor or text resource."""
    for old, new in _RULES:
        data = data.replace(old, new)
    return data


def relocate_class(data: bytes) -> bytes:
    """Rewrite every UTF8 constant of a class file; everything after the constant pool is copied."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    (count,) = struct.unpack_from(">H", data, 8)
    out = bytearray(data[:10])
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            text = relocate(data[pos + 3 : pos + 3 + length])
            out += b"\x01" + struct.pack(">H", len(text)) + text
            pos += 3 + length
        else:
            size = _CP_SIZES[tag]
            out += data[pos : pos + size]
            pos += size
            index += 1 if tag in (5, 6) else 0  # long/double take two pool slots
        index += 1
    out += data[pos:]
    return bytes(out)


def _entries(source: Path) -> list[tuple[str, bytes]]:
    """Relocated (name, content) pairs of one Jackson jar, minus multi-release and module metadata."""
    result = []
    with zipfile.ZipFile(source) as jar:
        for info in jar.infolist():
            name = info.filename
            if info.is_dir() or name == "META-INF/MANIFEST.MF" or name.startswith("META-INF/versions/"):
                continue
            if name.endswith("module-info.class"):
                continue
            data = jar.read(name)
            if name.endswith(".class"):
                data, name = relocate_class(data), relocate(name.encode()).decode()
            elif name.startswith("META-INF/services/"):
                data, name = relocate(data), relocate(name.encode()).decode()
            result.append((name, data))
    return result


def build_shaded_jackson(out: Path, sources: list[Path]) -> Path:
    """Write the relocated union of ``sources`` to ``out`` atomically; first entry of a name wins."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=out.name, suffix=".tmp", dir=out.parent)
    os.close(fd)
    seen: set[str] = set()
    try:
        with zipfile.ZipFile(tmp_name, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", _ZIP_EPOCH), "Manifest-Version: 1.0\n")
            for source in sources:
                for name, data in _entries(source):
                    if name not in seen:
                        seen.add(name)
                        jar.writestr(zipfile.ZipInfo(name, _ZIP_EPOCH), data, zipfile.ZIP_DEFLATED)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, out)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return out


def shaded_jackson_jar(out_dir: Path | str | None = None) -> Path:
    """Return the shaded Jackson jar in ``out_dir``, (re)building it unless it is newer than its inputs."""
    sources = find_jackson_jars()
    out = Path(out_dir or DEFAULT_OUT_DIR) / f"iceberg-shaded-jackson-{_jar_version(sources[0])}.jar"
    newest_input = max(p.stat().st_mtime for p in [*sources, Path(__file__)])
    if out.is_file() and out.stat().st_mtime >= newest_input:
        return out
    return build_shaded_jackson(out, sources)


def iceberg_jars(out_dir: Path | str | None = None) -> list[str]:
    """Return ``[runtime_jar, shaded_jackson_jar]`` as absolute paths, building the latter if needed."""
    return [str(find_runtime_jar().resolve()), str(shaded_jackson_jar(out_dir).resolve())]


def main(argv: list[str]) -> int:
    """CLI entry point: ``iceberg_jars.py [OUT_DIR]``."""
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    for jar in iceberg_jars(argv[0] if argv else None):
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
