"""Replies of a scripted LLM to Glassgraph's extraction prompts, made from the chunk's own text.

Relationships: the first name in the chunk (a run of capitalized words) ``mentioned with`` every
other name in it, as entities; definitions: the first name, defined by the chunk's first sentence.
Every extracted name is therefore written in the chunk it came from, which the tests check
through the provenance (chunk offsets into the page's text).
"""
from __future__ import annotations

import json
import re

import pytest
from scripted_llm import Recorded, Reply, ScriptedLLM

NAME = re.compile(r"\b[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*\b")
PREDICATE = "mentioned with"


def chunk_text(prompt: str) -> str:
    """The text between the prompt's ``<text>`` markers."""
    return prompt.split("<text>\n", 1)[1].rsplit("\n</text>", 1)[0]


def names(text: str) -> list[str]:
    return list(dict.fromkeys(NAME.findall(text)))


def relationships(text: str) -> list[dict]:
    found = names(text)
    return [{"subject": found[0], "predicate": PREDICATE, "object": other, "object-entity": True}
            for other in found[1:]]


def definitions(text: str) -> list[dict]:
    found = names(text)
    if not found:
        return []
    first_sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return [{"entity": found[0], "definition": first_sentence}]


def respond(request: Recorded) -> Reply:
    """A JSONL reply to either extraction prompt (fenced, with a junk line, as small models answer)."""
    prompt = request.prompt
    text = chunk_text(prompt)
    items = definitions(text) if "define the entities" in prompt else relationships(text)
    lines = [json.dumps(item) for item in items]
    return Reply(text="```json\n" + "\n".join(lines + ["Here are the results."]) + "\n```")


def graph_rag_reply(request: Recorded) -> Reply:
    """Extraction prompts as :func:`respond` answers them; edge selection picks the listed edges whose
    subject or object the question names; the answer is one sentence."""
    prompt = request.prompt
    if "<text>\n" in prompt:
        return respond(request)
    if "Select the edges" in prompt:
        question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
        edges = [json.loads(line) for line in prompt.splitlines() if line.startswith('{"id"') and '"s": ' in line]
        chosen = [e["id"] for e in edges if e["s"] in question or e["o"] in question]
        return Reply("\n".join(json.dumps({"id": i, "reasoning": "the question names it"}) for i in chosen[:8]))
    return Reply("A scripted answer from the selected edges.")


@pytest.fixture
def llm(scripted_llm: ScriptedLLM) -> ScriptedLLM:
    """The scripted OpenAI-compatible server of the test, answering with :func:`graph_rag_reply`."""
    scripted_llm.responder = graph_rag_reply
    return scripted_llm
