"""The graph jobs: thin handlers that build or load the frozen LM, prepare graphs (`world`,
`data`), call the method (`gara` through `runs`) on the job's device (`ctx.device`; float32: the
norms are part of the measurement), and store generators and PEFT adapters (`checkpoint`)."""

from __future__ import annotations

import json

from paperworks.services.graph import checkpoint, data, runs, world
from paperworks.services.graph.gara import batch_graphs
from paperworks.services.graph.gara.peft_export import graph_adapter, peft_files
from paperworks.services.graph.spec import EvaluateParams, GenerateAdapterParams, TrainGeneratorParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import resolve_input
from paperworks.shared.tasks.context import JobContext

OCTET = "application/octet-stream"
VALIDATION, HELD_OUT = 10**6, 10**9  # seed offsets of the validation and held-out graphs
ADAPTER_ARMS = ("static_lora", "gara_no_norm", "gara")


def run_train_generator(params: TrainGeneratorParams, ctx: JobContext) -> dict:
    total = params.steps + 2
    ctx.progress(
        0, total, stage="base LM", message="pre-training the tiny LM" if params.lm is None else "loading"
    )
    if params.lm is None:
        lm, tok = (
            world.pretrain_lm(seed=params.seed, steps=params.lm_steps, device=ctx.device),
            world.WordTokenizer(),
        )
        ctx.put_artifact(checkpoint.BASE_LM, checkpoint.lm_to_bytes(lm), OCTET)
    else:
        folder = resolve_input(params.lm, ctx, "graph", "lm", unpack=True)
        lm, tok = checkpoint.load_user_lm(folder, ctx.device, "lm")
    ctx.progress(1, total, stage="graphs", message=f"{params.train_graphs} source SBM graphs")
    train = runs.Prepared(lm, tok, world.family_set("sbm", params.seed, params.train_graphs), params.seed + 1)
    val = runs.Prepared(
        lm,
        tok,
        world.family_set("sbm", params.seed + VALIDATION, params.validation_graphs),
        params.seed + VALIDATION + 1,
    )

    def on_step(step, record):
        extra = f" validation {record['validation_accuracy']:.3f}" if "validation_accuracy" in record else ""
        ctx.progress(
            step + 1, total, stage=f"training {params.arm}", message=f"loss {record['loss']:.4f}{extra}"
        )

    try:
        model, fitted = runs.train_arm(
            lm,
            tok,
            params.arm,
            train,
            val,
            steps=params.steps,
            lr=params.learning_rate,
            rank=params.rank,
            hidden=params.hidden,
            targets=params.targets,
            seed=params.seed,
            device=ctx.device,
            on_step=on_step,
        )
    except ValueError as exc:  # a target no module of the LM is named
        raise InvalidArgument("targets", str(exc)) from None
    settings = {
        "arm": params.arm,
        "rank": params.rank,
        "hidden": params.hidden,
        "targets": params.targets,
        "seed": params.seed,
        "lm_steps": params.lm_steps,
        "lm": "tiny" if params.lm is None else params.lm.model_dump(mode="json"),
    }
    ref = ctx.put_artifact(checkpoint.GENERATOR, checkpoint.generator_to_bytes(model, settings), OCTET)
    ctx.announce_model(ref, f"GaRA {params.arm} (rank {params.rank}) on a frozen causal LM")
    ctx.put_json("history.json", {"settings": settings, "history": fitted.history})
    ratios = [h["norm_ratio"] for h in fitted.history if "norm_ratio" in h]
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ctx.progress(total, total, stage="done", message=f"validation {fitted.best_validation:.3f}")
    return {
        "arm": params.arm,
        "validation_accuracy": fitted.best_validation,
        "best_step": fitted.best_step,
        "steps_run": fitted.history[-1]["step"],
        "norm_ratio": ratios[-1] if ratios else None,
        "trainable_parameters": trainable,
    }


def load_generator(ctx, job_id: str, field: str):
    """(GaRAModel, tokenizer, settings, base LM) of a tenant's finished train_generator job."""
    raw, _ = ctx.job_artifact("graph", job_id, checkpoint.GENERATOR, field, kind="train_generator")
    settings = checkpoint.generator_settings(raw, field)
    lm_bytes = None
    # the base LM's identity: a user's LM reference, or the tiny LM's (seed, pre-training steps)
    base = json.dumps(
        [settings.get("lm", "tiny"), settings.get("seed"), settings.get("lm_steps")], sort_keys=True
    )
    if settings.get("lm", "tiny") == "tiny":
        lm_bytes, _ = ctx.job_artifact("graph", job_id, checkpoint.BASE_LM, field, kind="train_generator")
    lm, tok = data.base_lm(ctx, settings, lm_bytes, ctx.device, field)
    settings["base"] = base
    return checkpoint.generator_from_bytes(raw, lm, ctx.device, field), tok, settings, lm


def run_generate_adapter(params: GenerateAdapterParams, ctx: JobContext) -> dict:
    ctx.progress(0, 2, stage="loading", message="generator and graph")
    model, tok, settings, lm = load_generator(ctx, params.generator_job_id, "generator_job_id")
    if settings["arm"] not in ADAPTER_ARMS:
        raise InvalidArgument("generator_job_id", f"a {settings['arm']} arm has no LoRA adapter to export")
    graph, _ = data.load_graph(params.graph, ctx)
    data.check_texts(graph, tok, lm.get_input_embeddings().embedding_dim)
    x = runs.graph_features(lm, tok, graph)
    ctx.progress(1, 2, stage="generating", message=f"{graph.n} nodes: one generator forward")
    condition = model.condition(batch_graphs([(x, graph.edge_index())]).to(ctx.device))
    digest = graph.digest()
    files = peft_files(
        graph_adapter(model, condition if settings["arm"] != "static_lora" else None),
        settings["targets"],
        settings["rank"],
        metadata={"graph_digest": digest},
    )
    for name, blob in files.items():
        ctx.put_artifact(name, blob, "application/json" if name.endswith(".json") else OCTET)
    info = {
        "graph_digest": digest,
        "nodes": graph.n,
        "edges": graph.graph.number_of_edges(),
        "modules": len(model.adapted),
        "rank": settings["rank"],
    }
    ctx.put_json("adapter.json", info | {"generator_job_id": params.generator_job_id, "arm": settings["arm"]})
    ctx.progress(2, 2, stage="done", message=f"adapter for graph {digest[:12]}")
    return info


def run_evaluate(params: EvaluateParams, ctx: JobContext) -> dict:
    arms = []
    for i, job_id in enumerate(params.generator_job_ids):
        arms.append(load_generator(ctx, job_id, f"generator_job_ids.{i}"))
    tok = arms[0][1]
    if len({a[2]["base"] for a in arms}) > 1:
        raise InvalidArgument(
            "generator_job_ids",
            "the generators were trained on different base LMs "
            "(train every arm with the same seed and lm_steps, or the same lm)",
        )
    frozen = runs.build(arms[0][3], "frozen", 1, 8, (), 0, ctx.device)
    named = [("frozen", frozen, arms[0][3])] + [
        (
            a[2]["arm"] if [b[2]["arm"] for b in arms].count(a[2]["arm"]) == 1 else f"{a[2]['arm']}:{job_id}",
            a[0],
            a[3],
        )
        for a, job_id in zip(arms, params.generator_job_ids, strict=True)
    ]
    table: dict[str, dict[str, float]] = {name: {} for name, _, _ in named}
    total = len(params.families)
    for k, family in enumerate(params.families):
        ctx.progress(k, total, stage="evaluating", message=family)
        if family == "bundled":
            graphs = [world.bundled(n, params.seed) for n in world.BUNDLED]
        else:
            graphs = world.family_set(family, params.seed + HELD_OUT + k, params.graphs_per_family)
        for name, model, lm in named:  # node features from each arm's own base LM, same queries
            prepared = runs.Prepared(
                lm, tok, graphs, params.seed + HELD_OUT + 100 + k, params.queries_per_graph
            )
            table[name][family] = runs.accuracy(model, tok, prepared, ctx.device)
    ctx.put_json("evaluation.json", {"accuracy": table, "families": params.families})
    ctx.progress(total, total, stage="done", message="zero-shot table")
    return {"accuracy": table, "queries": params.graphs_per_family * params.queries_per_graph}
