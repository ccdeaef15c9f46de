"""MetaQA's movie KB (``kb.txt``: ``subject|relation|object``) as the Glassgraph collection ``metaqa``.

Entities become ``e:`` IRIs (the name, spaces as ``_``, percent-encoded) with the name as
``rdfs:label``; relations become ``r:`` IRIs labelled with their words (``directed by``), with
their other names from ``bench/metaqa_vocabulary.ttl`` (``skos:altLabel``). The N-Triples file and
the loaded on-disk store are cached in the bench dir.
"""
from __future__ import annotations

import gzip
import os
import re
from pathlib import Path
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode

from bench.workdir import bench_dir, cached_store
from server.config import PROJECT_ROOT
from server.ingest.load import load_file
from server.store import GraphStore
from server.vocab import ENTITY, RDFS, RELATION

METAQA_DIR = Path(os.environ.get("GLASSGRAPH_METAQA", PROJECT_ROOT.parent / "shared" / "data" / "metaqa"))
COLLECTION = "metaqa"
VOCABULARY = Path(__file__).with_name("metaqa_vocabulary.ttl")
_TOPIC = re.compile(r"\[([^\]]+)\]")


def entity(name: str) -> NamedNode:
    return ENTITY[quote(name.replace(" ", "_"), safe="")]


def relation(name: str) -> NamedNode:
    return RELATION[quote(name, safe="")]


def write_ntriples(kb: Path, target: Path) -> int:
    """Convert ``kb.txt`` to gzipped N-Triples (terms serialized by pyoxigraph); returns the triple count."""
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


def dev_questions(hops: int, metaqa_dir: Path = METAQA_DIR) -> list[tuple[str, str]]:
    """``(question without brackets, topic entity name)`` of every ``qa_dev_{hops}hop.txt`` line."""
    result = []
    for line in (metaqa_dir / f"qa_dev_{hops}hop.txt").read_text(encoding="utf-8").splitlines():
        question = line.split("\t", 1)[0]
        match = _TOPIC.search(question)
        if match:
            result.append((_TOPIC.sub(r"\1", question), match.group(1)))
    return result
