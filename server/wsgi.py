"""The WSGI entry point: ``gunicorn -w 1 -k gthread --threads 8 server.wsgi:app``.

One worker with threads, never ``--preload``: forking an open on-disk store corrupts it and only
one process may open it for writing (DESIGN.md section 5).
"""
from server.http.app import create_app

app = create_app()
