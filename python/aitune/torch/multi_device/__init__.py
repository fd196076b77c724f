"""Tuning on several devices at once: ait.tune(devices=[...]) evaluates a graph's candidates in
worker processes, one per device, and decides with the strategy's sequential rule (pool.py;
docs/guide.md, "Tuning on several GPUs")."""
