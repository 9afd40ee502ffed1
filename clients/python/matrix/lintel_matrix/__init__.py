"""The Python agent of the feature matrix; run as ``python3 -m lintel_matrix``."""
