"""The Java runtime on this machine, for the JVMs kreassign starts: Spark (`simulate`, `spark
start`) and real Kafka brokers (`sandbox start --engine kafka`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping


def find_java(env: Mapping[str, str] | None = None) -> str | None:
    """The java a JVM launcher would start: $JAVA_HOME/bin/java, else the first on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java", path=env.get("PATH"))


def java_version(java: str) -> int | None:
    """The major version of a `java` executable, or None if it does not run."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_java_version(proc.stderr + proc.stdout)


def parse_java_version(text: str) -> int | None:
    """`openjdk version "17.0.15"` -> 17; `java version "1.8.0_392"` -> 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major
