"""The shape of the code, read from its source: no import cycle among ``server/``'s packages, and the explain
stages named only where they are declared (``server/stages.py``).

``server/``'s packages are its subpackages (``rag``, ``explain``, ``http``, ``cli``, ``ingest``); the modules at its
top level (``vocab``, ``stages``, ``store``, ``runtime``, ...) are the shared base and the composition roots, which
any package may import. A package depends on another when any of its modules imports anything of it, at the top
or inside a function.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from server.stages import STAGES
from server.vocab import URN

ROOT = Path(__file__).resolve().parents[1]

# Sources that spell a stage's kind as something else, each with what it is there.
NOT_STAGE_NAMES = {
    ("server/http/api.py", "answer"): "the non-streaming answer's text field",
    ("server/cli/tg_invoke.py", "answer"): "reads that field",
    ("server/http/trustgraph_socket.py", "answer"): "reads that field",
    ("server/http/trustgraph_socket.py", "session"): "reads the non-streaming answer's session field",
    ("server/cli/glassgraph.py", "session"): "the explain command's argument",
    ("server/http/static/ask.js", "answer"): "the answer element's id",
    ("server/http/static/ask.js", "session"): "the Ask page's ?session= parameter",
    ("bench/document_rag.py", "answer"): "a benchmark question's expected answer",
    ("bench/load_http.py", "answer"): "a request's outcome: answered, not refused",
    ("bench/real_llm.py", "answer"): "the LLM's method",
}


def package_imports(server: Path) -> dict[str, set[str]]:
    """Each package of ``server`` (a directory) and the other packages its modules import."""
    packages = {path.name for path in server.iterdir() if (path / "__init__.py").exists()}
    graph: dict[str, set[str]] = {name: set() for name in packages}
    for path in server.rglob("*.py"):
        owner = path.relative_to(server).parts[0]
        if owner not in packages:
            continue  # a top-level module
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == server.name and len(parts) > 1 and parts[1] in packages and parts[1] != owner:
                    graph[owner].add(parts[1])
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as the packages along it (the first repeated at the end), or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            found = visit(target, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    return next((cycle for node in sorted(graph) if (cycle := visit(node, []))), None)


def test_no_import_cycle_among_server_packages() -> None:
    graph = package_imports(ROOT / "server")
    assert {"rag", "explain", "http", "cli", "ingest"} <= set(graph)
    assert find_cycle(graph) is None
    assert "explain" not in graph["rag"]  # the pipelines know only the sink they are given


def test_the_check_finds_a_loop(tmp_path: Path) -> None:
    """Two packages importing each other, as rag and explain did (the pipeline the recorder, the recorder
    rag.choice), one of them inside a function."""
    server = tmp_path / "server"
    for package, source in (("rag", "from server.explain.recorder import Recorder\n"),
                            ("explain", "def f():\n    from server.rag import choice\n"),
                            ("cli", "import server.rag.pipeline\nfrom server import vocab\n")):
        (server / package).mkdir(parents=True)
        (server / package / "__init__.py").write_text("")
        (server / package / "module.py").write_text(source)
    (server / "vocab.py").write_text("from server.rag import choice\n")  # the top level is no package
    graph = package_imports(server)
    assert graph == {"rag": {"explain"}, "explain": {"rag"}, "cli": {"rag"}}
    assert find_cycle(graph) == ["rag", "explain", "rag"]


# --- where a stage is named -----------------------------------------------------------------------------

_JS_COMMENT = re.compile(r"/\*.*?\*/|(?:^|\s)//[^\n]*", re.DOTALL)
_JS_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`(?:[^`\\]|\\.)*`')


def _python_strings(text: str) -> list[str]:
    return [node.value for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Constant)
            and isinstance(node.value, str)]


def _js_strings(text: str) -> list[str]:
    return [literal[1:-1] for literal in _JS_STRING.findall(_JS_COMMENT.sub(" ", text))]


def stage_spellings(root: Path) -> list[tuple[str, str]]:
    """``(file, spelling)`` for each stage name spelled outside the declaration in the Python (server, bench,
    data), JavaScript (the console's scripts, not the vendored libraries) and SPARQL sources under ``root``: a
    kind as a whole string (or a SPARQL variable), a stage's IRI prefix anywhere in a string or template, a
    console title as a whole string."""
    kinds = {stage.kind for stage in STAGES}
    prefixes = {URN + stage.infix for stage in STAGES}
    titles = {title for stage in STAGES for title in (stage.running, stage.done, stage.passages_done) if title}
    found = []
    sources = [*(root / "server").rglob("*.py"), *(root / "bench").rglob("*.py"), *(root / "data").rglob("*.py"),
               *(root / "server/http/static").glob("*.js"), *(root / "sparql").glob("*.r[qu]")]
    for path in sources:
        name = path.relative_to(root).as_posix()
        if name == "server/stages.py":
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".rq", ".ru"):
            spelled = {kind for kind in kinds if re.search(rf"\?{kind}\b", text)}
            spelled |= {prefix for prefix in prefixes if prefix in text}
        else:
            strings = _python_strings(text) if path.suffix == ".py" else _js_strings(text)
            spelled = {s for s in strings if s in kinds or s in titles}
            spelled |= {prefix for prefix in prefixes for s in strings if prefix in s}
        found += [(name, spelling) for spelling in sorted(spelled) if (name, spelling) not in NOT_STAGE_NAMES]
    return sorted(found)


def test_stages_are_named_only_in_their_declaration() -> None:
    assert stage_spellings(ROOT) == []


def test_the_spelling_check_finds_each_kind_of_spelling(tmp_path: Path) -> None:
    (tmp_path / "server/http/static").mkdir(parents=True)
    (tmp_path / "sparql").mkdir()
    (tmp_path / "server/pipeline.py").write_text('progress = "retrieval"\nIRI = f"urn:trustgraph:prov:answer:{1}"\n'
                                                 '"""A docstring about the selection is no spelling."""\n')
    (tmp_path / "server/http/static/ask.js").write_text('// "selection" in a comment\nconst t = "Selecting…";\n'
                                                        'if (kind === \'session\') go(`/console/trace`);\n')
    (tmp_path / "sparql/explain_session.rq").write_text("SELECT * { ?selection ?p ?o }\n")
    assert stage_spellings(tmp_path) == [
        ("server/http/static/ask.js", "Selecting…"), ("server/pipeline.py", "retrieval"),
        ("server/pipeline.py", "urn:trustgraph:prov:answer:"), ("sparql/explain_session.rq", "selection")]
