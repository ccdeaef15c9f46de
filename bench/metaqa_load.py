"""MetaQA's movie KB (``kb.txt``: ``subject|relation|object``) as the Glassgraph collection ``metaqa``.

Entities become ``e:`` IRIs (the name, spaces as ``_``, percent-encoded) with the name as
``rdfs:label``; relations become ``r:`` IRIs labelled with their words (``directed by``), with
their other names from ``bench/metaqa_vocabulary.ttl`` (``skos:altLabel``) in ``metaqa_store``
and without them in ``metaqa_plain_store``. ``metaqa_user_store`` loads it as a user would: IRIs
outside Glassgraph's namespace (``USER_BASE``), an ``rdfs:label`` on every entity and relation and
nothing else, sent as N-Triples in a Graph Store Protocol PUT to the collection's graph. The
N-Triples files and the loaded on-disk stores are cached in the bench dir.
"""
from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode

from bench.workdir import bench_dir, cached_store
from server.config import PROJECT_ROOT
from server.ingest.load import load_file
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION, collection_graph

METAQA_DIR = Path(os.environ.get("GLASSGRAPH_METAQA", PROJECT_ROOT.parent / "shared" / "data" / "metaqa"))
COLLECTION = "metaqa"
VOCABULARY = Path(__file__).with_name("metaqa_vocabulary.ttl")
USER_BASE = "http://movies.example.org/"  # the user-loaded variant's IRIs: {USER_BASE}entity/..., .../relation/...
_TOPIC = re.compile(r"\[([^\]]+)\]")


def entity(name: str) -> NamedNode:
    return ENTITY[quote(name.replace(" ", "_"), safe="")]


def relation(name: str) -> NamedNode:
    return RELATION[quote(name, safe="")]


def user_entity(name: str) -> NamedNode:
    return NamedNode(f"{USER_BASE}entity/{quote(name.replace(' ', '_'), safe='')}")


def user_relation(name: str) -> NamedNode:
    return NamedNode(f"{USER_BASE}relation/{quote(name, safe='')}")


def write_ntriples(kb: Path, target: Path, entity: Callable[[str], NamedNode] = entity,
                   relation: Callable[[str], NamedNode] = relation) -> int:
    """Convert ``kb.txt`` to gzipped N-Triples (terms serialized by pyoxigraph, IRIs made by ``entity`` and
    ``relation``); returns the triple count."""
    labelled: set[NamedNode] = set()
    count = 0
    with open(kb, encoding="utf-8") as lines, gzip.open(target, "wt", encoding="utf-8") as out:
        for line in lines:
            parts = line.rstrip("\n").split("|")
            if len(parts) != 3 or not all(parts):
                continue
            (s_name, s), (p_name, p), (o_name, o) = ((parts[0], entity(parts[0])), (parts[1], relation(parts[1])),
                                                     (parts[2], entity(parts[2])))
            out.write(f"{s} {p} {o} .\n")
            count += 1
            for term, label in ((s, s_name), (p, p_name.replace("_", " ")), (o, o_name)):
                if term not in labelled:
                    labelled.add(term)
                    out.write(f"{term} {RDFS.label} {Literal(label)} .\n")
                    count += 1
    return count


def metaqa_store(metaqa_dir: Path = METAQA_DIR) -> GraphStore:
    """The cached on-disk store holding MetaQA in the collection ``metaqa``."""
    def fill(store: GraphStore) -> None:
        data = bench_dir() / "metaqa.nt.gz"
        write_ntriples(metaqa_dir / "kb.txt", data)
        load_file(store, data, COLLECTION, progress=True)
        load_file(store, VOCABULARY, COLLECTION, progress=False)
    return cached_store("metaqa-vocabulary", fill)  # "metaqa": the store before the vocabulary


def metaqa_plain_store(metaqa_dir: Path = METAQA_DIR) -> GraphStore:
    """The cached store holding MetaQA without the hand-written vocabulary: labels only."""
    def fill(store: GraphStore) -> None:
        data = bench_dir() / "metaqa.nt.gz"
        write_ntriples(metaqa_dir / "kb.txt", data)
        load_file(store, data, COLLECTION, progress=True)
    return cached_store("metaqa-plain", fill)


def metaqa_user_store(metaqa_dir: Path = METAQA_DIR) -> GraphStore:
    """The cached store holding MetaQA as a user loads it: ``USER_BASE`` IRIs, labels only, through a Graph
    Store Protocol PUT (the app's own handler, in process) into the collection's graph."""
    from server.config import Config
    from server.http.app import create_app

    def fill(store: GraphStore) -> None:
        data = bench_dir() / "metaqa-user.nt.gz"
        write_ntriples(metaqa_dir / "kb.txt", data, user_entity, user_relation)
        body = gzip.decompress(data.read_bytes())
        config = Config(store_path=None, token="bench", load_sample=False, max_body_bytes=len(body) + 1,
                        query_workers=0)
        client = create_app(config, store).test_client()
        reply = client.put("/store", query_string={"graph": collection_graph(COLLECTION).value}, data=body,
                           headers={"Authorization": "Bearer bench", "Content-Type": "application/n-triples"})
        if reply.status_code not in (201, 204):
            raise RuntimeError(f"the Graph Store PUT answered {reply.status_code}: {reply.get_data(as_text=True)}")
    return cached_store("metaqa-user", fill)


def dev_questions(hops: int, metaqa_dir: Path = METAQA_DIR) -> list[tuple[str, str]]:
    """``(question without brackets, topic entity name)`` of every ``qa_dev_{hops}hop.txt`` line."""
    result = []
    for line in (metaqa_dir / f"qa_dev_{hops}hop.txt").read_text(encoding="utf-8").splitlines():
        question = line.split("\t", 1)[0]
        match = _TOPIC.search(question)
        if match:
            result.append((_TOPIC.sub(r"\1", question), match.group(1)))
    return result
