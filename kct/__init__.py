"""`kct`: one command for the whole toolkit (see kct/__main__.py)."""
