"""The pipeline engine's pure logic: a DAG of steps, the references between them, and which steps
can run. No platform import (the service's tasks and servicer bring the gRPC and the database)."""
from paperworks.services.pipeline.dag.graph import Dag, DagError, StepNode, parse
from paperworks.services.pipeline.dag.refs import (
    Outputs,
    Ref,
    find_refs,
    placeholders,
    resolve,
)

__all__ = ["Dag", "DagError", "Outputs", "Ref", "StepNode", "find_refs", "parse", "placeholders",
           "resolve"]
