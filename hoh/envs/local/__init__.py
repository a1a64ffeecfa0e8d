"""This machine as a place for attempts: the bubblewrap jail, its limits, its /etc (`executor.py`)."""
