"""The product's benchmarks: each prints its figures with their targets beside them.

Run one as ``python -m benchmarks.bench_x`` from the repository's root, or all of them in
their quick sizes as ``python -m benchmarks`` (``make bench``); benchmarks/README.md lists
them.
"""
