"""The production entry point: ``gunicorn -w 1 -k server.http.asgi.Worker server.asgi:app``.

One worker process on an embedded store, never ``--preload``: the store is opened here, in the worker,
and only one process may open it for writing. On a remote store (``GLASSGRAPH_STORE=http://...``) the
worker holds no data: ``-w N`` runs N of them against the engine. The worker's event loop holds the
connections; the Flask app runs in ``GLASSGRAPH_THREADS`` threads (``server/http/asgi.py``).
"""
import os
import sys
from typing import NoReturn

from flask import Flask

from server.config import Config
from server.errors import GlassgraphError
from server.http import allocator
from server.http.app import create_app
from server.http.asgi import WsgiBridge
from server.http.socket_budget import AnswerBudget
from server.http.write_gate import early_write_refusal, token_accepted


def _checked(config: Config) -> Config:
    if config.threads < 1:
        raise ValueError(f"GLASSGRAPH_THREADS must be at least 1, got {config.threads}")
    if config.body_timeout_s <= 0:
        raise ValueError(f"GLASSGRAPH_BODY_TIMEOUT must be more than 0 seconds, got {config.body_timeout_s:g}")
    if config.socket_memory_mb < 1:
        raise ValueError(f"GLASSGRAPH_SOCKET_MEMORY must be at least 1 (MB), got {config.socket_memory_mb}")
    if config.send_timeout_s <= 0:
        raise ValueError(f"GLASSGRAPH_SEND_TIMEOUT must be more than 0 seconds, got {config.send_timeout_s:g}")
    return config


def _start() -> tuple[Config, Flask, bool]:
    """The checked configuration, the app, and whether the allocator's arenas were bounded; a setting or a
    store that cannot work ends the worker with one line saying why (exit 3: gunicorn stops, "Worker failed
    to boot"), not a traceback."""
    try:
        config = _checked(Config.from_env())
        # before the store and the request threads start: arenas are bounded for the threads that have none yet
        tuned = config.malloc_arenas > 0 and allocator.tune(config.malloc_arenas)
        flask_app = create_app(config)
    except (ValueError, GlassgraphError) as exc:
        _stop(str(exc))
    except OSError as exc:  # a store path that is a file, or that cannot be written
        _stop(f"cannot open the store at {os.environ.get('GLASSGRAPH_STORE', 'the default path')}: {exc}")
    return config, flask_app, tuned


def _stop(reason: str) -> NoReturn:
    print(f"glassgraph: error: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(3) from None


config, flask_app, tuned = _start()
queries = flask_app.extensions["glassgraph.runtime"].queries
if queries is not None:
    queries.prestart()
app = WsgiBridge(flask_app, max_body_bytes=config.max_body_bytes, body_timeout_s=config.body_timeout_s,
                 threads=config.threads, send_timeout_s=config.send_timeout_s,
                 trimmer=allocator.Trimmer() if tuned else None,
                 check_head=early_write_refusal(config), token_ok=lambda token: token_accepted(config, token),
                 socket_budget=AnswerBudget(config.socket_memory_mb << 20, config.max_result_bytes,
                                            config.queue_wait_s))
