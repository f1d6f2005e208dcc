"""Resident memory of this process, for the benchmarks' tables."""

from __future__ import annotations

import resource


def rss_mb() -> float:
    """The process's resident set size in MB (``VmRSS``), or its peak where /proc is not there."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
