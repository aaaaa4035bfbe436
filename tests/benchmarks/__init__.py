"""Benchmarks that ship with the package, so anyone can measure on their own machine.

    python -m tests.benchmarks.scan     # full, selective and 1-column scans vs pyarrow and peers
    python -m tests.benchmarks.commit   # small-append latency, request counts, contention
    python -m tests.benchmarks.delete   # cost of deleting one row vs rewrites and peers
    python -m tests.benchmarks.scale    # 1-row commits and cold reads at 10 to 1M live files

Each prints Markdown tables; ``--help`` lists the size flags. Peers (deltalake, pyiceberg,
pylance) come with ``pip install manifest_table[bench]``; a missing one is skipped.
Method and results: docs/benchmarks.md.
"""
