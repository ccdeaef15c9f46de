"""Configuration from the environment (``GLASSGRAPH_*``), overridable by command-line flags."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.explain.retention import Retention

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SPARQL_DIR = PROJECT_ROOT / "sparql"
TEMPLATES_DIR = PROJECT_ROOT / "templates"
DATA_DIR = PROJECT_ROOT / "data"
SAMPLE_DATA = DATA_DIR / "factbook.nq.gz"


def _default_store_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "glassgraph", "store")


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _env_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """A ``GLASSGRAPH_*`` variable whose value cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Config:
    """Every setting, with its environment variable in the comment."""

    store_path: str | None = field(default_factory=_default_store_path)  # GLASSGRAPH_STORE (":memory:" = in memory)
    store_query_url: str | None = None  # GLASSGRAPH_STORE_QUERY_URL: a remote engine's query endpoint ({base}/query)
    store_update_url: str | None = None  # GLASSGRAPH_STORE_UPDATE_URL: its update endpoint ({base}/update)
    store_data_url: str | None = None  # GLASSGRAPH_STORE_DATA_URL: its Graph Store endpoint ({base}/store)
    store_token: str | None = None  # GLASSGRAPH_STORE_TOKEN: bearer token sent to the engine
    store_user: str | None = None  # GLASSGRAPH_STORE_USER: basic-auth user for the engine
    store_password: str | None = None  # GLASSGRAPH_STORE_PASSWORD
    store_dialect: str = "rdf12"  # GLASSGRAPH_STORE_DIALECT: rdf12 (<<( s p o )>>) | rdf-star (<< s p o >>)
    load_sample: bool = True  # GLASSGRAPH_LOAD_SAMPLE: load data/ into an empty store on first start
    default_collection: str = "default"  # GLASSGRAPH_COLLECTION
    explain_collection: str = "explainability"  # GLASSGRAPH_EXPLAIN_COLLECTION
    token: str | None = None  # GLASSGRAPH_TOKEN: bearer token for updates and uploads
    read_only: bool = False  # GLASSGRAPH_READ_ONLY: refuse every write over HTTP
    host: str = "127.0.0.1"  # GLASSGRAPH_HOST
    port: int = 7878  # GLASSGRAPH_PORT
    max_body_bytes: int = 10 * 1024 * 1024  # GLASSGRAPH_MAX_BODY
    body_timeout_s: float = 30.0  # GLASSGRAPH_BODY_TIMEOUT: seconds a request body may take to arrive (408)
    send_timeout_s: float = 30.0  # GLASSGRAPH_SEND_TIMEOUT: seconds a response may wait for a client reading none of it
    threads: int = 256  # GLASSGRAPH_THREADS: threads that run requests (server.asgi); a waiting query holds one
    malloc_arenas: int = 2  # GLASSGRAPH_MALLOC_ARENAS: the worker's glibc malloc arenas (0: glibc's choice, no trim)
    max_result_rows: int = 100_000  # GLASSGRAPH_MAX_ROWS
    max_result_bytes: int = 64 * 1024 * 1024  # GLASSGRAPH_MAX_RESULT_BYTES: largest SPARQL answer body
    socket_memory_mb: int = 256  # GLASSGRAPH_SOCKET_MEMORY: MB of answers TrustGraph sockets may hold unsent
    query_deadline_s: float = 30.0  # GLASSGRAPH_DEADLINE: a client's query is stopped past it
    query_workers: int = field(default_factory=lambda: max(2, _cores()))  # GLASSGRAPH_QUERY_WORKERS: processes
    # that evaluate clients' short queries (default: one per core, at least 2)
    long_queries: int = field(default_factory=lambda: max(8, 4 * _cores()))  # GLASSGRAPH_LONG_QUERIES: queries
    # running past 1 s at once, each in a process of its own beside the short ones (429 past it)
    long_after_s: float | None = None  # GLASSGRAPH_LONG_AFTER: CPU seconds after which a query is a long one
    # (default 0.1; on a remote store, seconds of the engine's time, default 1)
    queue_wait_s: float = 30.0  # GLASSGRAPH_QUEUE_WAIT: the longest a query waits for a worker (503 past it)
    queue_per_client: int = 128  # GLASSGRAPH_QUEUE_PER_CLIENT: a client's queries waiting at once (429 past it);
    # half of GLASSGRAPH_THREADS, so that one address cannot hold every request thread
    query_memory_mb: int = 2048  # GLASSGRAPH_QUERY_MEMORY: each query worker's memory cap (0: none)
    service_allow: tuple[str, ...] = ()  # GLASSGRAPH_SERVICE_ALLOW: endpoints SERVICE/LOAD may call
    service_timeout_s: float = 10.0  # GLASSGRAPH_SERVICE_TIMEOUT: one SERVICE call, connection to last byte
    service_max_rows: int = 10_000  # GLASSGRAPH_SERVICE_MAX_ROWS: most rows one SERVICE call may answer
    llm: str = "offline"  # GLASSGRAPH_LLM: offline | openai
    llm_base_url: str | None = None  # GLASSGRAPH_LLM_BASE_URL (or OPENAI_BASE_URL)
    llm_api_key: str | None = None  # GLASSGRAPH_LLM_API_KEY (or OPENAI_API_KEY)
    llm_model: str = "gpt-4o-mini"  # GLASSGRAPH_LLM_MODEL
    llm_timeout_s: float = 60.0  # GLASSGRAPH_LLM_TIMEOUT: seconds to the first token of a reply (each attempt)
    llm_deadline_s: float = 300.0  # GLASSGRAPH_LLM_DEADLINE: seconds one LLM call may take, streaming included
    llm_answer_tokens: int = 1024  # GLASSGRAPH_LLM_ANSWER_TOKENS: max_tokens of an answer
    llm_concurrency: int | None = None  # GLASSGRAPH_LLM_CONCURRENCY: calls at once per endpoint (1 for loopback)
    llm_retries: int = 2  # GLASSGRAPH_LLM_RETRIES
    llm_context: int = 8192  # GLASSGRAPH_LLM_CONTEXT: the model's context length in tokens (prompt and reply)
    embeddings: str = "wordllama"  # GLASSGRAPH_EMBEDDINGS: wordllama (offline, shipped) | openai (/v1/embeddings)
    embeddings_base_url: str | None = None  # GLASSGRAPH_EMBEDDINGS_BASE_URL (default: the LLM's base URL)
    embeddings_api_key: str | None = None  # GLASSGRAPH_EMBEDDINGS_API_KEY (default: the LLM's key)
    embeddings_model: str = "text-embedding-3-small"  # GLASSGRAPH_EMBEDDINGS_MODEL
    embeddings_timeout_s: float = 30.0  # GLASSGRAPH_EMBEDDINGS_TIMEOUT: one embeddings call
    passage_index: str | None = None  # GLASSGRAPH_PASSAGE_INDEX: the passages' sqlite file (default: beside the
    # store directory, STORE.passages.sqlite; in memory for an in-memory or remote store)
    vectors: str = "local"  # GLASSGRAPH_VECTORS: local (in the passage index) | qdrant (shared by app processes)
    qdrant_url: str | None = None  # GLASSGRAPH_QDRANT_URL: a Qdrant server (http://host:6333)
    qdrant_path: str | None = None  # GLASSGRAPH_QDRANT_PATH: Qdrant's local mode, a directory one process owns
    qdrant_api_key: str | None = None  # GLASSGRAPH_QDRANT_API_KEY
    sse_keepalive_s: float = 15.0  # GLASSGRAPH_SSE_KEEPALIVE: SSE comment after this idle time (0: none)
    check_answers: bool = True  # GLASSGRAPH_CHECK_ANSWERS: a model answer its edges do not hold gives way
    max_answers: int = 8  # GLASSGRAPH_MAX_ANSWERS: GraphRAG answers in progress at once (429 past it)
    max_question_chars: int = 2000  # GLASSGRAPH_MAX_QUESTION: longest GraphRAG question, in characters
    max_document_bytes: int = 32 * 1024 * 1024  # GLASSGRAPH_MAX_DOCUMENT: largest document to ingest
    document_read_s: float = 30.0  # GLASSGRAPH_DOCUMENT_SECONDS: an upload's text extraction, in its worker process
    document_memory_mb: int = 2048  # GLASSGRAPH_DOCUMENT_MEMORY: that worker's memory cap (0: none)
    trace_max_sessions: int = 10_000  # GLASSGRAPH_TRACE_MAX_SESSIONS: GraphRAG traces kept (0: all)
    trace_max_age_days: float = 0.0  # GLASSGRAPH_TRACE_MAX_AGE_DAYS: older traces are pruned (0: none)
    question_rate: float = 30.0  # GLASSGRAPH_QUESTION_RATE: anonymous questions a minute per client (0: any)
    public_url: str | None = None  # GLASSGRAPH_PUBLIC_URL: the server's public base URL (else the Host header)
    cors_origins: tuple[str, ...] = ()  # GLASSGRAPH_CORS_ORIGINS: origins whose pages may read answers ("*": any)
    trusted_proxies: tuple[str, ...] = ()  # GLASSGRAPH_TRUSTED_PROXIES: addresses whose X-Forwarded-For is believed

    @property
    def retention(self) -> Retention:
        """The traces' retention policy (``server/explain/retention.py``)."""
        from server.explain.retention import Retention
        return Retention(self.trace_max_sessions, self.trace_max_age_days)

    @property
    def remote_store(self) -> bool:
        """Whether ``GLASSGRAPH_STORE`` is a SPARQL engine's base URL rather than a directory."""
        return (self.store_path or "").startswith(("http://", "https://"))

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> Config:
        """Build from ``environ`` (default ``os.environ``); keyword overrides win (flags)."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, (names, kind) in _ENV.items():
            variable = next((var for var in names if var in env), None)  # the first variable set wins
            value = None if variable is None else _convert(kind, env[variable], variable)
            if value is not None:
                values[name] = value
        if "llm" not in values and (values.get("llm_base_url") or values.get("llm_api_key")):
            values["llm"] = "openai"
        config = cls(**values)
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in overrides.items() if v is not None and k in known}
        return replace(config, **clean)


def _convert(kind: str, raw: str, variable: str) -> object:
    """The value of ``variable`` (set to ``raw``) as ``kind``; None when empty (the default applies)."""
    text = raw.strip()
    if kind == "str":
        return raw or None
    if kind == "secret":  # a token pasted with its newline must still match; blank means none
        return text or None
    if not text:
        return None
    if kind == "bool":
        return _switch(text, variable)
    if kind == "url":
        if not text.startswith(("http://", "https://")) or any(ch.isspace() or ch in "<>\"" for ch in text):
            raise ConfigError(f"{variable} must be an http(s) URL such as https://kg.example.org, got {text!r}")
        return text
    if kind in ("int", "float"):
        return _number(kind, text, variable)
    return _env_list(raw)


def _switch(text: str, variable: str) -> bool:
    if text.lower() not in _TRUE | _FALSE:
        raise ConfigError(f"{variable} must be true or false (1/0, yes/no, on/off), got {text!r}")
    return text.lower() in _TRUE


def _number(kind: str, text: str, variable: str) -> int | float:
    """A finite number of at least 0."""
    try:
        value = int(text) if kind == "int" else float(text)
    except ValueError:
        raise ConfigError(f"{variable} must be {'an integer' if kind == 'int' else 'a number'}, "
                          f"got {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{variable} must be a number, got {text!r}")
    if value < 0:
        raise ConfigError(f"{variable} must be at least 0, got {text!r}")
    return value


_ENV: dict[str, tuple[tuple[str, ...], str]] = {  # setting -> (variables, the first one set wins; kind)
    "store_path": (("GLASSGRAPH_STORE",), "str"),
    "store_query_url": (("GLASSGRAPH_STORE_QUERY_URL",), "str"),
    "store_update_url": (("GLASSGRAPH_STORE_UPDATE_URL",), "str"),
    "store_data_url": (("GLASSGRAPH_STORE_DATA_URL",), "str"),
    "store_token": (("GLASSGRAPH_STORE_TOKEN",), "secret"),
    "store_user": (("GLASSGRAPH_STORE_USER",), "str"),
    "store_password": (("GLASSGRAPH_STORE_PASSWORD",), "secret"),
    "store_dialect": (("GLASSGRAPH_STORE_DIALECT",), "str"),
    "load_sample": (("GLASSGRAPH_LOAD_SAMPLE",), "bool"),
    "default_collection": (("GLASSGRAPH_COLLECTION",), "str"),
    "explain_collection": (("GLASSGRAPH_EXPLAIN_COLLECTION",), "str"),
    "token": (("GLASSGRAPH_TOKEN",), "secret"),
    "read_only": (("GLASSGRAPH_READ_ONLY",), "bool"),
    "host": (("GLASSGRAPH_HOST",), "str"),
    "port": (("GLASSGRAPH_PORT",), "int"),
    "max_body_bytes": (("GLASSGRAPH_MAX_BODY",), "int"),
    "body_timeout_s": (("GLASSGRAPH_BODY_TIMEOUT",), "float"),
    "send_timeout_s": (("GLASSGRAPH_SEND_TIMEOUT",), "float"),
    "threads": (("GLASSGRAPH_THREADS",), "int"),
    "malloc_arenas": (("GLASSGRAPH_MALLOC_ARENAS",), "int"),
    "max_result_rows": (("GLASSGRAPH_MAX_ROWS",), "int"),
    "max_result_bytes": (("GLASSGRAPH_MAX_RESULT_BYTES",), "int"),
    "socket_memory_mb": (("GLASSGRAPH_SOCKET_MEMORY",), "int"),
    "query_deadline_s": (("GLASSGRAPH_DEADLINE",), "float"),
    "query_workers": (("GLASSGRAPH_QUERY_WORKERS",), "int"),
    "query_memory_mb": (("GLASSGRAPH_QUERY_MEMORY",), "int"),
    "long_queries": (("GLASSGRAPH_LONG_QUERIES",), "int"),
    "queue_per_client": (("GLASSGRAPH_QUEUE_PER_CLIENT",), "int"),
    "long_after_s": (("GLASSGRAPH_LONG_AFTER",), "float"),
    "queue_wait_s": (("GLASSGRAPH_QUEUE_WAIT",), "float"),
    "service_allow": (("GLASSGRAPH_SERVICE_ALLOW",), "list"),
    "service_timeout_s": (("GLASSGRAPH_SERVICE_TIMEOUT",), "float"),
    "service_max_rows": (("GLASSGRAPH_SERVICE_MAX_ROWS",), "int"),
    "llm": (("GLASSGRAPH_LLM",), "str"),
    "llm_base_url": (("GLASSGRAPH_LLM_BASE_URL", "OPENAI_BASE_URL"), "str"),
    "llm_api_key": (("GLASSGRAPH_LLM_API_KEY", "OPENAI_API_KEY"), "str"),
    "llm_model": (("GLASSGRAPH_LLM_MODEL",), "str"),
    "llm_timeout_s": (("GLASSGRAPH_LLM_TIMEOUT",), "float"),
    "llm_retries": (("GLASSGRAPH_LLM_RETRIES",), "int"),
    "llm_deadline_s": (("GLASSGRAPH_LLM_DEADLINE",), "float"),
    "llm_answer_tokens": (("GLASSGRAPH_LLM_ANSWER_TOKENS",), "int"),
    "llm_concurrency": (("GLASSGRAPH_LLM_CONCURRENCY",), "int"),
    "llm_context": (("GLASSGRAPH_LLM_CONTEXT",), "int"),
    "embeddings": (("GLASSGRAPH_EMBEDDINGS",), "str"),
    "embeddings_base_url": (("GLASSGRAPH_EMBEDDINGS_BASE_URL",), "str"),
    "embeddings_api_key": (("GLASSGRAPH_EMBEDDINGS_API_KEY",), "str"),
    "embeddings_model": (("GLASSGRAPH_EMBEDDINGS_MODEL",), "str"),
    "embeddings_timeout_s": (("GLASSGRAPH_EMBEDDINGS_TIMEOUT",), "float"),
    "passage_index": (("GLASSGRAPH_PASSAGE_INDEX",), "str"),
    "vectors": (("GLASSGRAPH_VECTORS",), "str"),
    "qdrant_url": (("GLASSGRAPH_QDRANT_URL",), "str"),
    "qdrant_path": (("GLASSGRAPH_QDRANT_PATH",), "str"),
    "qdrant_api_key": (("GLASSGRAPH_QDRANT_API_KEY",), "str"),
    "sse_keepalive_s": (("GLASSGRAPH_SSE_KEEPALIVE",), "float"),
    "check_answers": (("GLASSGRAPH_CHECK_ANSWERS",), "bool"),
    "max_answers": (("GLASSGRAPH_MAX_ANSWERS",), "int"),
    "max_question_chars": (("GLASSGRAPH_MAX_QUESTION",), "int"),
    "max_document_bytes": (("GLASSGRAPH_MAX_DOCUMENT",), "int"),
    "document_read_s": (("GLASSGRAPH_DOCUMENT_SECONDS",), "float"),
    "document_memory_mb": (("GLASSGRAPH_DOCUMENT_MEMORY",), "int"),
    "trace_max_sessions": (("GLASSGRAPH_TRACE_MAX_SESSIONS",), "int"),
    "trace_max_age_days": (("GLASSGRAPH_TRACE_MAX_AGE_DAYS",), "float"),
    "question_rate": (("GLASSGRAPH_QUESTION_RATE",), "float"),
    "public_url": (("GLASSGRAPH_PUBLIC_URL",), "url"),
    "cors_origins": (("GLASSGRAPH_CORS_ORIGINS",), "list"),
    "trusted_proxies": (("GLASSGRAPH_TRUSTED_PROXIES",), "list"),
}
