"""The command-line tools: ``glassgraph`` (the embedded store, in-process) and
``tg-invoke-graph-rag`` (a server, over HTTP), with the terminal display they share.

Nothing is imported here, so that the HTTP client loads neither the store nor the retriever.
"""
