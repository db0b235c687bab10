"""The router service: MILD learning to defer under expert imbalance, and Selective Deferred Routing."""
