"""The generated world of the graph service: text-attributed graphs from several families, the
whole-graph task, the word vocabulary and the small frozen LM (a transformers Llama with random
init, pre-trained here on generated text, so `peft` can load exported adapters onto it).

Task ("role"): every graph has two communities, each with a colour word drawn per graph (node text
= its community's colour). The community holding the graph's best-connected node (highest degree,
lowest index on ties) is "core", the other "fringe". A query names one node by its text and three
sampled neighbours' texts:  ``node c3 nbr c3 c3 c5 ; role ?`` -> ``core`` | ``fringe``. Colours are
re-drawn per graph, so the prompt alone says nothing about the answer: the whole graph is needed.

Families: stochastic block models with varied homophily (the source family), Barabási-Albert and
Watts-Strogatz graphs (communities by Kernighan-Lin bisection), and networkx's bundled graphs
(karate club with its two factions, Davis Southern Women's women/events, Florentine families and
Les Misérables bisected) as held-out sets. The LM's pre-training text asks the same prompt format
local questions (colour, majority neighbour colour, and "role" by local homophily), so its "role"
prior is a local rule the whole-graph task contradicts half of the time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import torch
from paperworks.shared.threads import TRANSFORMERS_LOCK

COLORS = tuple(f"c{i}" for i in range(4))
ROLES = ("core", "fringe")
SPECIAL = ("<pad>", "<s>", "</s>")
WORDS = ("node", "nbr", "none", ";", "role", "color", "most", "?", *ROLES, *COLORS)
VOCAB = (*SPECIAL, *WORDS)
INDEX = {w: i for i, w in enumerate(VOCAB)}
PAD, BOS, EOS = 0, 1, 2
NEIGHBOURS = 3
SOURCE_FAMILIES = ("sbm",)
HELD_OUT_FAMILIES = ("barabasi_albert", "watts_strogatz")
BUNDLED = ("karate_club", "davis_southern_women", "florentine_families", "les_miserables")


class WordTokenizer:
    """Whitespace words of `VOCAB` -> ids with a leading <s>; unknown words raise KeyError."""

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def encode(self, text: str, bos: bool = True) -> list[int]:
        return ([BOS] if bos else []) + [INDEX[w] for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(VOCAB[i] for i in ids if i > EOS)


@dataclass
class TaskGraph:
    """A graph with two communities and node texts; `core` is the community of the hub."""

    name: str
    family: str
    graph: nx.Graph
    community: np.ndarray  # (n,) 0/1
    texts: list[str]
    features: np.ndarray | None = None  # (n, f) numeric node features instead of text embeddings
    core: int = field(init=False)

    def __post_init__(self):
        nodes = list(self.graph.nodes)
        degrees = np.array([self.graph.degree(v) for v in nodes])
        self.core = int(self.community[int(np.argmax(degrees))])

    @property
    def n(self) -> int:
        return self.graph.number_of_nodes()

    def edge_index(self) -> torch.Tensor:
        index = {v: i for i, v in enumerate(self.graph.nodes)}
        pairs = [(index[a], index[b]) for a, b in self.graph.edges if a != b]
        if not pairs:
            return torch.zeros((2, 0), dtype=torch.long)
        e = torch.tensor(pairs, dtype=torch.long).T
        return torch.cat([e, e.flip(0)], dim=1)

    def answer(self, node: int) -> str:
        return ROLES[0] if self.community[node] == self.core else ROLES[1]

    def prompt(self, node: int, rng: np.random.Generator, question: str = "role") -> tuple[str, list[str]]:
        """(prompt text, the listed neighbours' texts)."""
        nodes = list(self.graph.nodes)
        nbrs = [nodes.index(u) for u in self.graph.neighbors(nodes[node])]
        listed = [self.texts[int(u)] for u in rng.choice(nbrs, NEIGHBOURS)] if nbrs else ["none"] * NEIGHBOURS
        return f"node {self.texts[node]} nbr {' '.join(listed)} ; {question} ?", listed

    def queries(self, rng: np.random.Generator, count: int) -> list[tuple[str, str]]:
        """`count` (prompt, answer) pairs, half from each community where both are non-empty."""
        out = []
        for i in range(count):
            members = np.flatnonzero(self.community == (i % 2))
            if len(members) == 0:
                members = np.arange(self.n)
            node = int(rng.choice(members))
            out.append((self.prompt(node, rng)[0], self.answer(node)))
        return out

    def digest(self) -> str:
        """sha256 of the graph as the adapter sees it (edges and node texts): the adapter cache key."""
        h = hashlib.sha256()
        h.update(self.edge_index().numpy().tobytes())
        h.update("\x00".join(self.texts).encode())
        return h.hexdigest()


def _colour_texts(rng: np.random.Generator, community: np.ndarray) -> list[str]:
    pair = rng.choice(len(COLORS), 2, replace=False)
    return [COLORS[pair[int(c)]] for c in community]


def _bisect(graph: nx.Graph, seed: int) -> np.ndarray:
    a, _ = nx.community.kernighan_lin_bisection(graph, seed=seed)
    return np.array([0 if v in a else 1 for v in graph.nodes])


def _relabelled(graph: nx.Graph) -> nx.Graph:
    return nx.convert_node_labels_to_integers(nx.Graph(graph))


def generate(family: str, rng: np.random.Generator, name: str = "") -> TaskGraph:
    """One graph of a generated family with its communities and colour texts."""
    seed = int(rng.integers(2**31))
    if family == "sbm":
        sizes = [int(s) for s in rng.integers(8, 25, 2)]
        p_in = float(rng.uniform(0.2, 0.5))
        p_out = p_in * float(rng.uniform(0.05, 0.4))  # homophily varies graph to graph
        graph = nx.stochastic_block_model(sizes, [[p_in, p_out], [p_out, p_in]], seed=seed)
        community = np.array([0] * sizes[0] + [1] * sizes[1])
    elif family == "barabasi_albert":
        graph = nx.barabasi_albert_graph(int(rng.integers(20, 51)), int(rng.integers(1, 4)), seed=seed)
        community = _bisect(graph, seed)
    elif family == "watts_strogatz":
        graph = nx.connected_watts_strogatz_graph(
            int(rng.integers(20, 51)), int(rng.choice([4, 6])), float(rng.uniform(0.1, 0.3)), seed=seed
        )
        community = _bisect(graph, seed)
    else:
        raise ValueError(f"unknown family {family!r}")
    return TaskGraph(
        name or f"{family}-{seed}", family, _relabelled(graph), community, _colour_texts(rng, community)
    )


def bundled(name: str, seed: int = 0) -> TaskGraph:
    """One of networkx's bundled real graphs with its two communities (ground truth where the data
    has it: karate club factions, Davis women vs events; else Kernighan-Lin bisection)."""
    rng = np.random.default_rng(seed)
    if name == "karate_club":
        g = nx.karate_club_graph()
        community = np.array([0 if g.nodes[v]["club"] == "Mr. Hi" else 1 for v in g.nodes])
    elif name == "davis_southern_women":
        g = nx.davis_southern_women_graph()
        community = np.array([g.nodes[v]["bipartite"] for v in g.nodes])
    elif name == "florentine_families":
        g = nx.florentine_families_graph()
        community = _bisect(g, seed)
    elif name == "les_miserables":
        g = nx.les_miserables_graph()
        community = _bisect(g, seed)
    else:
        raise ValueError(f"unknown bundled graph {name!r}")
    return TaskGraph(name, "bundled", _relabelled(g), community, _colour_texts(rng, community))


def family_set(family: str, seed: int, count: int) -> list[TaskGraph]:
    rng = np.random.default_rng(seed)
    return [generate(family, rng) for _ in range(count)]


# ---- the frozen LM ------------------------------------------------------------------------------


def tiny_lm_config(hidden: int = 64, layers: int = 2, heads: int = 4):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(VOCAB),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=64,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        tie_word_embeddings=False,
    )


def pretraining_batch(rng: np.random.Generator, graphs: list[TaskGraph], size: int) -> list[str]:
    """Local questions in the task's prompt format, with their answers appended."""
    texts = []
    for _ in range(size):
        g = graphs[int(rng.integers(len(graphs)))]
        node = int(rng.integers(g.n))
        question = ("color", "most", "role")[int(rng.integers(3))]
        prompt, listed = g.prompt(node, rng, question)
        own = g.texts[node]
        if question == "color":
            answer = own
        elif question == "most":
            answer = max(sorted(set(listed)), key=listed.count)
        else:  # a local rule: "core" when most listed neighbours share my colour
            answer = ROLES[0] if listed.count(own) >= 2 else ROLES[1]
        texts.append(f"{prompt} {answer}")
    return texts


def pretrain_lm(
    seed: int = 0,
    steps: int = 300,
    hidden: int = 64,
    layers: int = 2,
    batch_size: int = 64,
    lr: float = 3e-3,
    device: str = "cpu",
    on_step=None,
):
    """A fresh tiny Llama trained on generated local-question text; returned frozen, in eval mode."""
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with TRANSFORMERS_LOCK:
            lm = LlamaForCausalLM(tiny_lm_config(hidden, layers))
        lm.to(device)
    rng = np.random.default_rng(seed)
    pool = family_set("sbm", seed + 7, 64)
    tok = WordTokenizer()
    optimizer = torch.optim.AdamW(lm.parameters(), lr=lr)
    lm.train()
    for step in range(1, steps + 1):
        ids = torch.tensor([tok.encode(t) for t in pretraining_batch(rng, pool, batch_size)], device=device)
        loss = lm(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if on_step is not None:
            on_step(step, float(loss))
    lm.eval()
    for p in lm.parameters():
        p.requires_grad_(False)
    return lm


def node_features(lm, tokenizer, texts: list[str], device="cpu") -> torch.Tensor:
    """(n, hidden): the frozen LM's mean input embedding of each node's text."""
    table = lm.get_input_embeddings().weight.detach()
    rows = []
    for text in texts:
        ids = tokenizer.encode(text, bos=False)
        rows.append(table[torch.tensor(ids or [0], device=table.device)].mean(0))
    return torch.stack(rows).float().to(device)
