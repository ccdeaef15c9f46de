"""The sample data and the tool that makes it (``python -m data.factbook``); not installed with the server."""
