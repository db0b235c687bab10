"""Inputs of the ops service: none beyond its parameters.

A digest job's whole input is its seed, steps and rounds per step (spec.py); it reads no dataset,
model or file, so nothing here goes through the data-root guard or the artifact store. A service
with inputs loads them here (see services/README.md).
"""
