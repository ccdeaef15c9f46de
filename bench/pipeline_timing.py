"""The non-LLM time of GraphRAG questions on MetaQA, for ``bench/quality.py``: run as a script, with
``--tree DIR`` first on the import path, so that the same questions time today's code and a baseline
revision's (``git archive``) in the same run. Uses only APIs both share; prints one JSON line:
``{"1": median seconds, "2": ..., "3": ...}``.

    python bench/pipeline_timing.py --tree DIR --questions FILE.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", required=True)
    parser.add_argument("--questions", required=True, help='JSON {"1": [question, ...], ...}')
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    from bench.bench_retrieval import TimedLLM
    from bench.metaqa_load import COLLECTION, metaqa_store
    from server.config import Config
    from server.rag.pipeline import GraphRag
    from server.rag.providers import make_llm
    from server.rag.retrieval import RetrievalLimits, Retriever

    store = metaqa_store()
    llm = TimedLLM(make_llm(Config(llm="offline", store_path=None)))
    rag = GraphRag(store, Retriever(store), llm, sinks=None)  # never explainable here
    questions = json.loads(open(args.questions, encoding="utf-8").read())
    medians = {}
    for hops, asked in questions.items():
        limits = RetrievalLimits(max_path_length=int(hops), max_subgraph_size=400)
        list(rag.run(asked[0], COLLECTION, explainable=False, limits=limits))  # warm-up: label index, model
        spent = []
        for question in asked:
            llm.seconds = 0.0
            started = time.perf_counter()
            list(rag.run(question, COLLECTION, explainable=False, limits=limits))
            spent.append(time.perf_counter() - started - llm.seconds)
        medians[hops] = statistics.median(spent)
    print(json.dumps(medians))


if __name__ == "__main__":
    main()
