"""W3C conformance side by side: every test of the SPARQL 1.1 Protocol and Graph Store Protocol
manifests (``tests/w3c/``) against the production command and against ``oxigraph serve`` (the
baseline, from the ``oxigraph`` wheel), with the same runner as ``tests/test_w3c_conformance.py``.

Oxigraph's server takes queries at ``/query``, updates at ``/update`` and the Graph Store Protocol
at ``/store``, with no token. Each test starts from an empty store on either server. Prints one
row per suite (passed / tests, and the ratio to the baseline), then each failure with its reason.

Run from the project root: ``python -m bench.w3c_conformance`` (a few seconds; nothing is cached).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.bench_retrieval import _table
from server.config import PROJECT_ROOT

sys.path.append(str(PROJECT_ROOT / "tests"))  # the runner and the servers live with the tests that use them
from oxigraph_server import OxigraphServer  # noqa: E402
from production_server import TOKEN, ProductionServer  # noqa: E402
from w3c_manifest import GRAPH_STORE_MANIFEST, PROTOCOL_MANIFEST, ManifestTest, read_manifest  # noqa: E402
from w3c_runner import Target, run_manifest_test  # noqa: E402

SUITES = {"SPARQL 1.1 Protocol": read_manifest(PROTOCOL_MANIFEST, "ProtocolTest"),
          "Graph Store Protocol (listed)": [t for t in read_manifest(GRAPH_STORE_MANIFEST, "GraphStoreProtocolTest")
                                            if t.listed],
          "Graph Store Protocol (unlisted)": [t for t in read_manifest(GRAPH_STORE_MANIFEST,
                                                                       "GraphStoreProtocolTest") if not t.listed]}


def failures(target: Target, tests: list[ManifestTest]) -> dict[str, str]:
    """Test name -> the first line of why it failed, for every test that failed."""
    failed = {}
    for test in tests:
        try:
            run_manifest_test(target, test)
        except AssertionError as failure:
            failed[test.name] = (str(failure).splitlines() or ["failed"])[0][:160]
    return failed


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="glassgraph-w3c-") as workdir:
        for name in ("glassgraph", "oxigraph"):
            Path(workdir, name).mkdir()
        glassgraph = ProductionServer(Path(workdir, "glassgraph", "store"))
        oxigraph = OxigraphServer(Path(workdir, "oxigraph", "store"))
        try:
            targets = {"Glassgraph": Target(glassgraph.url, headers={"Authorization": f"Bearer {TOKEN}"}),
                       "oxigraph serve": Target(oxigraph.url, query_path="/query", update_path="/update")}
            results = {(name, suite): failures(target, tests) for name, target in targets.items()
                       for suite, tests in SUITES.items()}
        finally:
            glassgraph.close()
            oxigraph.close()
    rows = []
    for suite, tests in SUITES.items():
        passed = {name: len(tests) - len(results[(name, suite)]) for name in targets}
        ratio = passed["Glassgraph"] / passed["oxigraph serve"] if passed["oxigraph serve"] else float("inf")
        rows.append([suite, str(len(tests)), f"{passed['Glassgraph']}/{len(tests)}",
                     f"{passed['oxigraph serve']}/{len(tests)}", f"{ratio:.2f}"])
    print(_table(["suite", "tests", "Glassgraph passed", "oxigraph serve passed", "ratio"], rows))
    for (name, suite), failed in results.items():
        for test, reason in failed.items():
            print(f"\n{name} fails {suite} / {test}:\n  {reason}")


if __name__ == "__main__":
    main()
