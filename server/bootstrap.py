"""Opening the configured store, with the sample dataset on first start."""
from __future__ import annotations

import logging

from server.config import SAMPLE_DATA, Config
from server.ingest.load import build_store, load_file, new_store_directory
from server.store import GraphStore

log = logging.getLogger(__name__)


def open_store(config: Config, progress: bool = False) -> GraphStore:
    """Open the store of ``config``; an empty store gets the sample data in the default collection.

    A store that does not exist yet is built by the (faster) bulk loader, then opened.
    """
    sample = config.load_sample and SAMPLE_DATA.exists()
    target = new_store_directory(config.store_path) if sample else None
    if target is not None:
        count = build_store(target, SAMPLE_DATA, config.default_collection, progress=progress)
        log.info("built the store with the sample dataset: %d quads into collection %r",
                 count, config.default_collection)
    store = GraphStore(config.store_path, explain_collection=config.explain_collection)
    if sample and store.is_empty():
        count = load_file(store, SAMPLE_DATA, config.default_collection, progress=progress)
        log.info("loaded the sample dataset: %d quads into collection %r", count, config.default_collection)
    return store
