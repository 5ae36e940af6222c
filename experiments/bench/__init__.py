"""Benchmarks of evaluation throughput (issue 7): compile_bench.py, throughput.py."""
