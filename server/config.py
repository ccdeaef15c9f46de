"""Configuration from the environment (``GLASSGRAPH_*``), overridable by command-line flags."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SPARQL_DIR = PROJECT_ROOT / "sparql"
TEMPLATES_DIR = PROJECT_ROOT / "templates"
DATA_DIR = PROJECT_ROOT / "data"
SAMPLE_DATA = DATA_DIR / "factbook.nq.gz"


def _default_store_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "glassgraph", "store")


def _env_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Config:
    """Every setting, with its environment variable in the comment."""

    store_path: str | None = field(default_factory=_default_store_path)  # GLASSGRAPH_STORE (":memory:" = in memory)
    load_sample: bool = True  # GLASSGRAPH_LOAD_SAMPLE: load data/ into an empty store on first start
    default_collection: str = "default"  # GLASSGRAPH_COLLECTION
    explain_collection: str = "explainability"  # GLASSGRAPH_EXPLAIN_COLLECTION
    token: str | None = None  # GLASSGRAPH_TOKEN: bearer token for updates and uploads
    read_only: bool = False  # GLASSGRAPH_READ_ONLY: refuse every write over HTTP
    host: str = "127.0.0.1"  # GLASSGRAPH_HOST
    port: int = 7878  # GLASSGRAPH_PORT
    max_body_bytes: int = 10 * 1024 * 1024  # GLASSGRAPH_MAX_BODY
    max_result_rows: int = 100_000  # GLASSGRAPH_MAX_ROWS
    query_deadline_s: float = 30.0  # GLASSGRAPH_DEADLINE: checked while results stream
    service_allow: tuple[str, ...] = ()  # GLASSGRAPH_SERVICE_ALLOW: endpoints SERVICE/LOAD may call
    llm: str = "offline"  # GLASSGRAPH_LLM: offline | openai
    llm_base_url: str | None = None  # GLASSGRAPH_LLM_BASE_URL (or OPENAI_BASE_URL)
    llm_api_key: str | None = None  # GLASSGRAPH_LLM_API_KEY (or OPENAI_API_KEY)
    llm_model: str = "gpt-4o-mini"  # GLASSGRAPH_LLM_MODEL
    llm_timeout_s: float = 60.0  # GLASSGRAPH_LLM_TIMEOUT
    llm_retries: int = 2  # GLASSGRAPH_LLM_RETRIES
    sse_keepalive_s: float = 15.0  # GLASSGRAPH_SSE_KEEPALIVE: SSE comment after this idle time (0: none)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> Config:
        """Build from ``environ`` (default ``os.environ``); keyword overrides win (flags)."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name, (names, kind) in _ENV.items():
            raw = next((env[var] for var in names if var in env), None)  # the first variable set wins
            if raw is None or raw == "":
                continue
            values[name] = _convert(kind, raw)
        if "llm" not in values and (values.get("llm_base_url") or values.get("llm_api_key")):
            values["llm"] = "openai"
        config = cls(**values)
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in overrides.items() if v is not None and k in known}
        return replace(config, **clean)


def _convert(kind: str, raw: str) -> object:
    if kind == "bool":
        return raw.strip().lower() in _TRUE
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "list":
        return _env_list(raw)
    return raw


_ENV: dict[str, tuple[tuple[str, ...], str]] = {  # setting -> (variables, the first one set wins; kind)
    "store_path": (("GLASSGRAPH_STORE",), "str"),
    "load_sample": (("GLASSGRAPH_LOAD_SAMPLE",), "bool"),
    "default_collection": (("GLASSGRAPH_COLLECTION",), "str"),
    "explain_collection": (("GLASSGRAPH_EXPLAIN_COLLECTION",), "str"),
    "token": (("GLASSGRAPH_TOKEN",), "str"),
    "read_only": (("GLASSGRAPH_READ_ONLY",), "bool"),
    "host": (("GLASSGRAPH_HOST",), "str"),
    "port": (("GLASSGRAPH_PORT",), "int"),
    "max_body_bytes": (("GLASSGRAPH_MAX_BODY",), "int"),
    "max_result_rows": (("GLASSGRAPH_MAX_ROWS",), "int"),
    "query_deadline_s": (("GLASSGRAPH_DEADLINE",), "float"),
    "service_allow": (("GLASSGRAPH_SERVICE_ALLOW",), "list"),
    "llm": (("GLASSGRAPH_LLM",), "str"),
    "llm_base_url": (("GLASSGRAPH_LLM_BASE_URL", "OPENAI_BASE_URL"), "str"),
    "llm_api_key": (("GLASSGRAPH_LLM_API_KEY", "OPENAI_API_KEY"), "str"),
    "llm_model": (("GLASSGRAPH_LLM_MODEL",), "str"),
    "llm_timeout_s": (("GLASSGRAPH_LLM_TIMEOUT",), "float"),
    "llm_retries": (("GLASSGRAPH_LLM_RETRIES",), "int"),
    "sse_keepalive_s": (("GLASSGRAPH_SSE_KEEPALIVE",), "float"),
}
