"""hoh's egress proxy: every connection a role makes, by its allow-list, logged, the key added (`proxy.py`);
the route an attempt takes to it from its jail or environment (`route.py`)."""
