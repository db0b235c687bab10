"""GaRA's parts one by one (services/graph/gara): the norm constraint, the low-rank update with a
per-example generated factor, the max-pooled GNN, the arms around a transformers Llama, the PEFT
export round-tripped through the `peft` package, and the graph inputs (node-link JSON, PyG
safetensors, CSV) with their refusals."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import torch
from paperworks.services.graph import checkpoint, data, runs, world
from paperworks.services.graph.gara import (
    GraphEncoder,
    LowRankLinear,
    batch_graphs,
    column_l1,
    norm_constrain,
)
from paperworks.services.graph.gara.peft_export import CONFIG_FILE, WEIGHTS_FILE, graph_adapter, peft_files
from paperworks.services.graph.gara.train import Batch, answer_loss, option_probabilities
from paperworks.shared.errors import InvalidArgument
from safetensors.numpy import save as np_save

TOK = world.WordTokenizer()


@pytest.fixture(scope="module")
def lm():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(world.tiny_lm_config(hidden=32, layers=2, heads=2)).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _graph(seed=0, family="sbm"):
    g = world.generate(family, np.random.default_rng(seed))
    return g


def test_norm_constraint_matches_the_static_column_l1_and_is_guarded():
    g = torch.randn(3, 16, 4) * torch.tensor([0.1, 1.0, 50.0])[:, None, None]
    left = torch.randn(16, 4)
    out = norm_constrain(g, left)
    assert torch.allclose(column_l1(out), column_l1(left).expand(3), rtol=1e-5)
    # direction kept, only the scale changes
    assert torch.allclose(
        out / out.norm(dim=(1, 2), keepdim=True), g / g.norm(dim=(1, 2), keepdim=True), atol=1e-6
    )
    zero = norm_constrain(torch.zeros(2, 16, 4), left)
    assert torch.isfinite(zero).all() and zero.abs().sum() == 0


def test_low_rank_linear_is_w0_plus_left_plus_generated_times_right_transposed():
    base = torch.nn.Linear(6, 5, bias=False)
    layer = LowRankLinear(base, 3, torch.Generator().manual_seed(1))
    with torch.no_grad():
        layer.left.normal_()
    g = torch.randn(2, 5, 3)
    layer.generated = g
    x = torch.randn(2, 7, 6)
    for b in range(2):
        w = base.weight + (layer.left + g[b]) @ layer.right.T
        assert torch.allclose(layer(x)[b], x[b] @ w.T, atol=1e-5)


def test_encoder_max_pools_per_graph_and_ignores_node_order():
    enc = GraphEncoder(4, 8)
    rng = np.random.default_rng(0)
    graphs = []
    for n in (5, 9):
        g = nx.gnp_random_graph(n, 0.5, seed=int(rng.integers(100)))
        e = torch.tensor(list(g.edges)).T
        graphs.append((torch.randn(n, 4), torch.cat([e, e.flip(0)], 1)))
    joint = enc(batch_graphs(graphs))
    alone = torch.cat([enc(batch_graphs([g])) for g in graphs])
    assert torch.allclose(joint, alone, atol=1e-6)
    x, e = graphs[1]
    perm = torch.randperm(x.shape[0])
    inverse = torch.argsort(perm)
    permuted = (x[perm], inverse[e])
    assert torch.allclose(enc(batch_graphs([permuted])), alone[1:], atol=1e-5)


def test_frozen_and_zero_init_arms_leave_the_lm_unchanged(lm):
    ids = torch.tensor([TOK.encode("node c1 nbr c1 c2 c1 ; role ?")])
    mask = torch.ones_like(ids)
    reference = lm(input_ids=ids, attention_mask=mask).logits
    g = _graph()
    gb = batch_graphs([(world.node_features(lm, TOK, g.texts), g.edge_index())])
    for arm in ("frozen", "static_lora", "gara"):
        model = runs.build(lm, arm, 4, 16, ("q_proj", "v_proj"), 0)
        out = model(ids, mask, model.condition(gb), torch.zeros(1, dtype=torch.long))
        assert torch.allclose(out, reference, atol=1e-5), arm  # L = 0 and Ĝ = 0 · G_f at init
    model = runs.build(lm, "gara_no_norm", 4, 16, ("q_proj", "v_proj"), 0)
    out = model(ids, mask, model.condition(gb), torch.zeros(1, dtype=torch.long))
    assert not torch.allclose(out, reference, atol=1e-6)  # the raw generated factor acts at once
    assert len(model.adapted) == 4 and all(p.requires_grad is False for p in lm.parameters())


def test_one_training_step_moves_only_the_arm_and_options_are_a_distribution(lm):
    g = _graph(1)
    x = world.node_features(lm, TOK, g.texts)
    rng = np.random.default_rng(0)
    q = g.queries(rng, 4)
    batch = Batch(
        batch_graphs([(x, g.edge_index())]),
        [TOK.encode(p) for p, _ in q],
        [TOK.encode(a, bos=False) for _, a in q],
        torch.zeros(4, dtype=torch.long),
    )
    model = runs.build(lm, "gara", 4, 16, ("q_proj",), 0)
    before = {k: v.clone() for k, v in model.lm.state_dict().items() if "lora" not in k}
    loss, cond = answer_loss(model, batch, world.PAD, "cpu")
    loss.backward()
    assert model.adapted["model.layers.0.self_attn.q_proj"].left.grad.abs().sum() > 0
    assert all(torch.equal(v, model.lm.state_dict()[k]) for k, v in before.items())
    probs = option_probabilities(
        model, cond, batch.prompts, runs.options(TOK), batch.graph_index, world.PAD, "cpu"
    )
    assert probs.shape == (4, 2) and torch.allclose(probs.sum(1), torch.ones(4))


def test_peft_export_round_trips_through_peft_with_identical_logits(lm, tmp_path):
    from peft import PeftModel

    g = _graph(2, "barabasi_albert")
    gb = batch_graphs([(world.node_features(lm, TOK, g.texts), g.edge_index())])
    model = runs.build(lm, "gara", 4, 16, ("q_proj", "v_proj"), 0)
    with torch.no_grad():
        for m in model.adapted.values():
            m.left.normal_(std=0.3)
    cond = model.condition(gb)
    for name, blob in peft_files(graph_adapter(model, cond), ("q_proj", "v_proj"), 4).items():
        (tmp_path / name).write_bytes(blob)
    assert json.loads((tmp_path / CONFIG_FILE).read_text())["lora_alpha"] == 4
    assert (tmp_path / WEIGHTS_FILE).exists()
    import copy

    served = PeftModel.from_pretrained(copy.deepcopy(lm), tmp_path).eval()
    ids = torch.tensor(
        [TOK.encode("node c1 nbr c1 c2 c1 ; role ?"), TOK.encode("node c2 nbr none none none ; role ?")]
    )
    mask = torch.ones_like(ids)
    ours = model(ids, mask, cond, torch.zeros(2, dtype=torch.long))
    theirs = served(input_ids=ids, attention_mask=mask).logits
    base = lm(input_ids=ids, attention_mask=mask).logits
    assert not torch.allclose(ours, base, atol=1e-3)
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_generator_checkpoint_round_trips(lm):
    model = runs.build(lm, "gara", 2, 16, ("v_proj",), 3)
    with torch.no_grad():
        for m in model.adapted.values():
            m.left.normal_()
    settings = {"arm": "gara", "rank": 2, "hidden": 16, "targets": ["v_proj"], "seed": 3, "lm": "tiny"}
    base = checkpoint.lm_from_bytes(checkpoint.lm_to_bytes(lm), "cpu", "f")
    again = checkpoint.generator_from_bytes(checkpoint.generator_to_bytes(model, settings), base, "cpu", "f")
    for k, v in model.trainable_state().items():
        assert torch.equal(v, again.trainable_state()[k])
    with pytest.raises(InvalidArgument) as err:
        checkpoint.generator_from_bytes(b"\x08" + b"\x00" * 7 + b"{}", base, "cpu", "generator_job_id")
    assert err.value.field == "generator_job_id"


def test_world_tasks_need_the_whole_graph():
    karate = world.bundled("karate_club")
    assert karate.answer(33) == "core" and karate.answer(0) == "fringe"  # node 33 is the hub
    davis = world.bundled("davis_southern_women")
    assert davis.n == 32 and set(davis.community.tolist()) == {0, 1}
    g = _graph(5)
    q = g.queries(np.random.default_rng(0), 10)
    assert {a for _, a in q} == {"core", "fringe"}
    assert all(len(TOK.encode(p)) == 10 for p, _ in q)
    # the same prompt gets both answers across graphs: colours are drawn per graph
    answers = {}
    for s in range(30):
        g = _graph(s)
        for node in range(g.n):
            answers.setdefault(g.texts[node], set()).add(g.answer(node))
    assert all(v == {"core", "fringe"} for v in answers.values())


def test_graph_files_parse_and_bad_ones_name_the_field(tmp_path):
    g = _graph(0, "watts_strogatz")
    graph = g.graph.copy()
    for v in graph.nodes:
        graph.nodes[v]["text"] = g.texts[v]
    doc = json.dumps(nx.node_link_data(graph, edges="links")).encode()
    parsed, ids = data.from_node_link(doc, "graph.file")
    assert parsed.texts == g.texts and parsed.graph.number_of_edges() == g.graph.number_of_edges()
    assert ids[0] == "0"
    e = g.edge_index().numpy()
    blob = np_save({"x": np.ones((g.n, 32), np.float32), "edge_index": e.astype(np.int64)})
    pyg, _ = data.from_pyg_safetensors(blob, "graph.file")
    assert pyg.features.shape == (g.n, 32) and pyg.graph.number_of_edges() == g.graph.number_of_edges()
    (tmp_path / "nodes.csv").write_text("id,text\na,c1\nb,c2\nc,c1\n")
    (tmp_path / "edges.csv").write_text("source,target\na,b\nb,c\n")
    csvg, ids = data.from_csv_folder(tmp_path, "graph.file")
    assert ids == ["a", "b", "c"] and csvg.texts == ["c1", "c2", "c1"]
    bad = [
        (lambda: data.from_node_link(b"{nope", "graph.file")),
        (lambda: data.from_pyg_safetensors(b"garbage", "graph.file")),
        (
            lambda: data.from_pyg_safetensors(
                np_save({"x": np.ones((2, 3), np.float32), "edge_index": np.array([[0], [5]])}), "graph.file"
            )
        ),
    ]
    for call in bad:
        with pytest.raises(InvalidArgument) as err:
            call()
        assert err.value.field == "graph.file"
    (tmp_path / "edges.csv").write_text("source,target\na,zzz\n")
    with pytest.raises(InvalidArgument):
        data.from_csv_folder(tmp_path, "graph.file")
    with pytest.raises(InvalidArgument) as err:
        data.check_texts(csvg.__class__("x", "file", csvg.graph, csvg.community, ["hello"] * 3), TOK, 32)
    assert "vocabulary" in str(err.value)


def test_a_users_hugging_face_folder_loads_and_answers(lm, tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    inner = Tokenizer(WordLevel({w: i for i, w in enumerate(world.VOCAB)}, unk_token="<pad>"))
    inner.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=inner, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    lm.save_pretrained(tmp_path, safe_serialization=True)
    fast.save_pretrained(tmp_path)
    user_lm, tok = checkpoint.load_user_lm(tmp_path, "cpu", "lm")
    assert tok.encode("node c1 ; role ?") == world.WordTokenizer().encode("node c1 ; role ?")
    graphs = [_graph(s) for s in range(2)]
    prepared = runs.Prepared(user_lm, tok, graphs, 0, 4)
    model = runs.build(user_lm, "gara", 2, 16, ("q_proj",), 0)
    assert 0.0 <= runs.accuracy(model, tok, prepared) <= 1.0
    with pytest.raises(InvalidArgument) as err:
        checkpoint.load_user_lm(tmp_path / "nope", "cpu", "lm")
    assert err.value.field == "lm"
