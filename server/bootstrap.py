"""Opening the configured store (embedded or on a remote engine), with the sample dataset on first start."""
from __future__ import annotations

import logging

from server.config import SAMPLE_DATA, Config, ConfigError
from server.ingest.load import build_store, load_file, new_store_directory
from server.ingest.migrate import migrate_document_ids
from server.remote_store import EngineEndpoints, RemoteStore
from server.sparql_templates import DIALECTS
from server.store import GraphStore
from server.store_base import StoreBackend

log = logging.getLogger(__name__)


def connect_store(config: Config) -> StoreBackend:
    """The store ``config`` names, as it is: the remote engine at ``GLASSGRAPH_STORE=http(s)://...``,
    or the embedded store in that directory (or in memory)."""
    if not config.remote_store:
        return GraphStore(config.store_path, explain_collection=config.explain_collection)
    if config.store_dialect not in DIALECTS:
        raise ConfigError(f"GLASSGRAPH_STORE_DIALECT must be one of {', '.join(DIALECTS)}, "
                          f"got {config.store_dialect!r}")
    endpoints = EngineEndpoints.of(config.store_path, config.store_query_url, config.store_update_url,
                                   config.store_data_url, token=config.store_token, user=config.store_user,
                                   password=config.store_password)
    return RemoteStore(endpoints, config.explain_collection, config.store_dialect,
                       timeout_s=max(config.query_deadline_s, 1.0), pool_size=max(config.threads, 4))


def open_store(config: Config, progress: bool = False) -> StoreBackend:
    """Open the store of ``config`` (the one factory: app, ``server.asgi``, CLI); an empty store gets the
    sample data in the default collection.

    An embedded store that does not exist yet is built by the (faster) bulk loader, then opened.
    """
    sample = config.load_sample and SAMPLE_DATA.exists()
    if config.remote_store:
        store = connect_store(config)
        if sample and store.is_empty():
            count = load_file(store, SAMPLE_DATA, config.default_collection, progress=progress)
            log.info("loaded the sample dataset into %s: %d quads", config.store_path, count)
        return _migrated(store)
    target = new_store_directory(config.store_path) if sample else None
    if target is not None:
        count = build_store(target, SAMPLE_DATA, config.default_collection, progress=progress)
        log.info("built the store with the sample dataset: %d quads into collection %r",
                 count, config.default_collection)
    store = connect_store(config)
    if sample and store.is_empty():
        count = load_file(store, SAMPLE_DATA, config.default_collection, progress=progress)
        log.info("loaded the sample dataset: %d quads into collection %r", count, config.default_collection)
    return _migrated(store)


def _migrated(store: StoreBackend) -> StoreBackend:
    """``store`` with documents ingested before ids included the collection moved (``ingest.migrate``)."""
    moved = migrate_document_ids(store)
    if moved:
        log.info("moved %d document(s) to their collection's IRIs", moved)
    return store
