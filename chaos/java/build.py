"""Build the Java driver with Maven, once per source version, into a cache outside the work tree.

`ensure_driver()` hashes `pom.xml` and every file under `src/`; the build for that hash lives in
`<cache>/java-driver/<hash>/` (`classes/`, `lib/` with kafka-clients and its runtime jars, and a `BUILT` stamp
written last). A missing build runs `mvn -q -B compile dependency:copy-dependencies` into a temporary directory
beside it, offline first (`-o`: after one build, or after `fixtures.kafka_install` filled ~/.m2, nothing is
downloaded) and online only if the offline attempt could not resolve something, then renames it into place: a failed
build never leaves a half-built driver, and its error quotes Maven's own lines (the artefact it could not resolve,
the source file and line that did not compile). A file lock serialises concurrent builds of the same hash.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent  # pom.xml and src/ (committed)
MAIN_CLASS = "kct.chaos.Driver"
MAVEN_TIMEOUT_S = 900
STAMP = "BUILT"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class BuildError(RuntimeError):
    """The driver could not be built; the message says which step failed and quotes Maven's reason."""


@dataclass(frozen=True)
class DriverBuild:
    """A built driver: `java -cp classpath kct.chaos.Driver`."""

    home: Path

    @property
    def classpath(self) -> str:
        return os.pathsep.join([str(self.home / "classes"), str(self.home / "lib" / "*")])

    def jars(self) -> list[str]:
        return sorted(p.name for p in (self.home / "lib").glob("*.jar"))


def cache_root() -> Path:
    """`$KCT_CACHE_DIR`, else `$XDG_CACHE_HOME/kct`, else `~/.cache/kct` (the same root as the Kafka jars)."""
    if os.environ.get("KCT_CACHE_DIR"):
        return Path(os.environ["KCT_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kct"


def source_hash(source: Path = SOURCE) -> str:
    """sha256 over pom.xml and src/** (paths and contents): a changed source is a new build, never a stale one."""
    h = hashlib.sha256()
    files = [source / "pom.xml", *sorted(p for p in (source / "src").rglob("*") if p.is_file())]
    for f in files:
        if not f.exists():
            raise BuildError(f"driver source missing: {f}")
        h.update(str(f.relative_to(source)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_dir(source: Path = SOURCE) -> Path:
    return cache_root() / "java-driver" / source_hash(source)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tools() -> str:
    mvn, javac = shutil.which("mvn"), shutil.which("javac")
    if not mvn:
        raise BuildError("cannot build the Java driver: `mvn` (Maven 3.8+) is not on PATH; install Debian `maven` "
                         "(./run does this as root)")
    if not javac:
        raise BuildError("cannot build the Java driver: `javac` (JDK 17+) is not on PATH; install Debian "
                         "`default-jdk-headless`")
    return mvn


def _reason(output: str) -> str:
    """Maven's ERROR lines (what failed: an unresolvable artefact, a compile error with file:line), shortened."""
    lines = [ANSI.sub("", ln).rstrip() for ln in output.splitlines()]
    noise = ("To see the full stack trace", "Re-run Maven", "For more information", "[Help", "-> [Help")
    picked: list[str] = []
    for ln in lines:
        body = ln.removeprefix("[ERROR]").strip()
        if ln.startswith("[ERROR]") and body and not body.startswith(noise) and ln not in picked:
            picked.append(ln)
    return "\n".join((picked or lines[-12:])[:12])


def ensure_driver(source: Path = SOURCE, *, quiet: bool = True) -> DriverBuild:
    """The built driver for `source`, building it first if needed (see the module docstring)."""
    dest = build_dir(source)
    if (dest / STAMP).exists():
        return DriverBuild(dest)
    mvn = _tools()
    with _locked(dest.parent / f".{dest.name}.lock"):
        if (dest / STAMP).exists():
            return DriverBuild(dest)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            last, built = "", False
            for offline in (True, False):
                argv = [mvn, "-B", "-f", str(source / "pom.xml"), f"-Dkct.out={tmp}",
                        "compile", "dependency:copy-dependencies"]
                if quiet:
                    argv.insert(1, "-q")
                if offline:
                    argv.insert(1, "-o")
                try:
                    p = subprocess.run(argv, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S,
                                       cwd=str(source), stdin=subprocess.DEVNULL)
                except subprocess.TimeoutExpired as e:
                    raise BuildError(f"Java driver build: `mvn compile` did not finish in {MAVEN_TIMEOUT_S}s") from e
                if not quiet:
                    sys.stderr.write(p.stdout + p.stderr)
                if p.returncode == 0:
                    built = True
                    break
                last = _reason(p.stdout + p.stderr)
                if "COMPILATION ERROR" in p.stdout + p.stderr:
                    break  # no download will fix the source
            if not built:
                raise BuildError(f"Java driver build failed (mvn compile dependency:copy-dependencies on "
                                 f"{source / 'pom.xml'}):\n{last}")
            if not (tmp / "classes" / Path(*MAIN_CLASS.split("."))).with_suffix(".class").exists():
                raise BuildError(f"Java driver build: Maven succeeded but {MAIN_CLASS} was not compiled into {tmp}")
            if not any(j.name.startswith("kafka-clients-") for j in (tmp / "lib").glob("*.jar")):
                raise BuildError("Java driver build: kafka-clients is missing from the copied dependencies")
            for junk in ("generated-sources", "maven-status"):
                shutil.rmtree(tmp / junk, ignore_errors=True)
            (tmp / STAMP).write_text(source_hash(source) + "\n")
            if dest.exists():
                shutil.rmtree(dest)
            tmp.rename(dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return DriverBuild(dest)
