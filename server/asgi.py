"""The production entry point: ``gunicorn -w 1 -k server.http.asgi.Worker server.asgi:app``.

One worker process on an embedded store, never ``--preload``: the store is opened here, in the worker,
and only one process may open it for writing. On a remote store (``GLASSGRAPH_STORE=http://...``) the
worker holds no data: ``-w N`` runs N of them against the engine. The worker's event loop holds the
connections; the Flask app runs in ``GLASSGRAPH_THREADS`` threads (``server/http/asgi.py``).
"""
from server.config import Config
from server.http.app import create_app
from server.http.asgi import WsgiBridge
from server.http.write_gate import early_write_refusal


def _checked(config: Config) -> Config:
    if config.threads < 1:
        raise ValueError(f"GLASSGRAPH_THREADS must be at least 1, got {config.threads}")
    if config.body_timeout_s <= 0:
        raise ValueError(f"GLASSGRAPH_BODY_TIMEOUT must be more than 0 seconds, got {config.body_timeout_s:g}")
    return config


config = _checked(Config.from_env())
app = WsgiBridge(create_app(config), max_body_bytes=config.max_body_bytes, body_timeout_s=config.body_timeout_s,
                 threads=config.threads, check_head=early_write_refusal(config))
