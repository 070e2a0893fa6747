"""A fake libnvidia-ml.so.1 built from C by the test suite, and the Python side that drives it.

See `fake_nvml.c` for the scenario file format and `harness.py` for the builder and helpers.
"""
