"""Facts from chunks of text with an LLM: TrustGraph's two extraction prompts, answered in JSONL.

``templates/prompts/extract_definitions.j2`` asks for ``{"entity", "definition"}`` lines,
``extract_relationships.j2`` for ``{"subject", "predicate", "object", "object-entity"}`` lines. Replies
are parsed tolerantly: code fences, blank lines, a JSON list instead of lines, junk lines and
objects with a missing field are skipped and counted. Chunks run concurrently (LLM latency
dominates); a chunk whose calls still fail after the client's retries yields no facts and a warning.

Grounding: a fact is kept only when its chunk names what it is about: the subject (and an entity
object; a definition's entity) occurs in the chunk's words, or is an entity the chunk mentions by
label (``ground``'s ``mentioned``). A fact equal to one of the prompts' own examples is never kept,
even from a chunk that names its entities: small models copy the examples. Both are counted
(``ChunkFacts.ungrounded``).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from server.config import TEMPLATES_DIR
from server.rag.llm import LLMCancelled, LLMError, render_prompt
from server.rag.text import normalize

PROMPTS = ("extract_definitions", "extract_relationships")
REPLY_TOKENS_BASE = 256  # max_tokens of an extraction reply: this, and a token for every 2 bytes of the chunk
REPLY_TOKENS_MAX = 4096


class Completer(Protocol):
    """An LLM that completes one prompt (``server.rag.openai_llm.OpenAILLM``)."""

    model: str

    def complete(self, prompt: str, max_tokens: int | None = None) -> str: ...


@dataclass(frozen=True)
class Definition:
    entity: str
    definition: str


@dataclass(frozen=True)
class Relationship:
    subject: str
    predicate: str
    object: str
    object_entity: bool


@dataclass
class ChunkFacts:
    """What the LLM extracted from one chunk; ``skipped`` counts reply lines that were not usable,
    ``ungrounded`` the facts dropped by :func:`ground`, ``errors`` the calls that failed (one line each)."""

    definitions: list[Definition] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)
    skipped: int = 0
    ungrounded: int = 0
    errors: list[str] = field(default_factory=list)


def reply_tokens(text: str) -> int:
    """``max_tokens`` of an extraction reply for a chunk of ``text``."""
    return min(REPLY_TOKENS_MAX, REPLY_TOKENS_BASE + len(text.encode()) // 2)


def ground(facts: ChunkFacts, text: str, mentioned: Callable[[str], bool] = lambda name: False) -> None:
    """Drop (and count in ``facts.ungrounded``) the facts of a chunk of ``text`` whose entities it does
    not name (``mentioned(name)``: the entity ``name`` resolves to is one the chunk mentions by label),
    and every fact equal to a prompt's example."""
    words = f" {normalize(text)} "
    folded = text.casefold()

    def named(name: str) -> bool:
        key = normalize(name)
        symbols_only = not any(ch.isalnum() for ch in key)  # normalize keeps a name of symbols as it is
        return f" {key} " in words or (symbols_only and key in folded) or mentioned(name)

    examples = _prompt_examples()
    relationships = [r for r in facts.relationships if r not in examples and named(r.subject)
                     and (not r.object_entity or named(r.object))]
    definitions = [d for d in facts.definitions if d not in examples and named(d.entity)]
    facts.ungrounded += len(facts.relationships) - len(relationships) + len(facts.definitions) - len(definitions)
    facts.relationships, facts.definitions = relationships, definitions


@lru_cache(maxsize=1)
def _prompt_examples() -> frozenset[Definition | Relationship]:
    """The facts the extraction prompts show as examples (their JSON lines)."""
    found: set[Definition | Relationship] = set()
    for name in PROMPTS:
        source = (TEMPLATES_DIR / "prompts" / f"{name}.j2").read_text(encoding="utf-8")
        lines = "\n".join(line for line in source.splitlines() if line.startswith("{\""))
        found.update(parse_definitions(lines)[0] if name == "extract_definitions" else parse_relationships(lines)[0])
    return frozenset(found)


def prompt_versions() -> list[str]:
    """``name@sha256-prefix`` of each extraction prompt's file: a changed prompt is a new version."""
    versions = []
    for name in PROMPTS:
        digest = hashlib.sha256((TEMPLATES_DIR / "prompts" / f"{name}.j2").read_bytes()).hexdigest()
        versions.append(f"{name}@{digest[:12]}")
    return versions


def _reply_objects(text: str) -> Iterator[object]:
    """Each JSON value of a JSONL reply (``None`` for a line that is not JSON); fences and blank
    lines are dropped, and a line holding a JSON list gives its items."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("```"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            yield None
            continue
        if isinstance(value, list):
            yield from value
        else:
            yield value


def _text_field(item: dict, name: str) -> str | None:
    value = item.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate escaped in the JSON ("\ud800"): no RDF literal holds one
        return None
    return value.strip()


def parse_definitions(text: str) -> tuple[list[Definition], int]:
    """The definitions of a reply and the number of unusable lines."""
    found, skipped = [], 0
    for item in _reply_objects(text):
        entity = _text_field(item, "entity") if isinstance(item, dict) else None
        definition = _text_field(item, "definition") if isinstance(item, dict) else None
        if entity and definition:
            found.append(Definition(entity, definition))
        else:
            skipped += 1
    return found, skipped


def parse_relationships(text: str) -> tuple[list[Relationship], int]:
    """The relationships of a reply and the number of unusable lines. ``object-entity`` defaults to
    true when missing (TrustGraph's default); any other non-boolean value makes the line unusable."""
    found, skipped = [], 0
    for item in _reply_objects(text):
        parts = [_text_field(item, name) for name in ("subject", "predicate", "object")] \
            if isinstance(item, dict) else [None]
        entity = item.get("object-entity", True) if isinstance(item, dict) else None
        if all(parts) and isinstance(entity, bool):
            subject, predicate, obj = parts
            found.append(Relationship(subject, predicate, obj, entity))
        else:
            skipped += 1
    return found, skipped


def extract_chunk(llm: Completer, text: str) -> ChunkFacts:
    """Both prompts on one chunk's text; a failed call is recorded, not raised (a cancelled one is)."""
    facts = ChunkFacts()
    for name, parse, target in (("extract_definitions", parse_definitions, facts.definitions),
                                ("extract_relationships", parse_relationships, facts.relationships)):
        try:
            reply = llm.complete(render_prompt(name, text=text), reply_tokens(text))
        except LLMCancelled:
            raise
        except LLMError as exc:
            facts.errors.append(f"{name}: {exc}")
            continue
        items, skipped = parse(reply)
        target.extend(items)
        facts.skipped += skipped
    return facts


def extract_all(llm: Completer, texts: Sequence[str], workers: int,
                progress: Callable[[], None] | None = None) -> list[ChunkFacts]:
    """:func:`extract_chunk` on every text, ``workers`` at a time, results in the texts' order.

    Interrupted (Ctrl-C: ``KeyboardInterrupt`` in the waiting thread), it cancels the LLM's calls in
    progress and queued (``llm.cancel()`` where the provider has one) and returns at once, without
    waiting for the workers, which end as their calls do."""
    def one(text: str) -> ChunkFacts:
        facts = extract_chunk(llm, text)
        if progress is not None:
            progress()
        return facts

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="extract")
    try:
        return list(pool.map(one, texts))
    except BaseException:
        cancel = getattr(llm, "cancel", None)
        if cancel is not None:
            cancel()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
