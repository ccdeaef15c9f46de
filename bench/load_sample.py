"""Loading the sample (data/factbook.nq.gz) into an empty on-disk store, both ways.

    python -m bench.load_sample [--runs N]

Baseline: ``load_file`` (one pyoxigraph transaction, any store). Ours on first start:
``build_store`` (the bulk loader into a staging directory, renamed into place). Prints seconds,
peak memory of each child process, quads and the ratio to the baseline. The machine is shared:
its load average is printed too.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from server.config import SAMPLE_DATA

CHILD = """
import json, resource, sys, time
from server.ingest.load import build_store, load_file
from server.store import GraphStore
mode, path = sys.argv[1:3]
started = time.perf_counter()
if mode == "load_file":
    count = load_file(GraphStore(path), sys.argv[3], "default", progress=False)
else:
    count = build_store(path, sys.argv[3], "default", progress=False)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "quads": count,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(mode: str, workdir: Path) -> dict:
    target = Path(tempfile.mkdtemp(dir=workdir)) / "store"
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(target), str(SAMPLE_DATA)], check=True,
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"sample: {SAMPLE_DATA} ({SAMPLE_DATA.stat().st_size / 1e6:.1f} MB gzip); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        results = {mode: [run(mode, Path(tmp)) for _ in range(args.runs)] for mode in ("load_file", "build_store")}
    base = median(r["seconds"] for r in results["load_file"])
    print(f"{'method':<14}{'quads':>9}{'median s':>10}{'min s':>8}{'peak MB':>9}{'vs load_file':>14}")
    for mode, rows in results.items():
        seconds = [r["seconds"] for r in rows]
        print(f"{mode:<14}{rows[0]['quads']:>9}{median(seconds):>10.1f}{min(seconds):>8.1f}"
              f"{max(r['rss_mb'] for r in rows):>9.0f}{base / median(seconds):>13.1f}x")


if __name__ == "__main__":
    main()
