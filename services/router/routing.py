"""Online routing with a trained policy: features in, one decision out, at most one remote call.

`load_router` turns a policy artifact into a ready router (modules rebuilt from the artifact's
tensors, the local LM loaded once, all on the server's device; a model folder the policy names is
made local for the caller's tenant, `inputs`). `route` is the whole Route computation without
gRPC, so it is tested and benchmarked directly; `decision_ms` times only the decision given the
features (the rejector or decision-module forward and the argmax, with the features' copy to the
device), which is what the issue bounds at 5 ms.

An executed remote call speaks the agent model's `api` (chat, the default: /v1/chat/completions with
the request text as one user message; or the legacy /v1/completions). The answer comes back whole
(up to `max_answer_tokens`, default 256, with the finish reason) unless the request asks for
`first_line_only` (the remote is then asked to stop at a newline and the answer is its first line).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from paperworks.services.router.checkpoint import Policy
from paperworks.services.router.mild.rejector import Rejector
from paperworks.services.router.sdr.decider import OperatingPoint, QualityHeads, lambda_for_budget
from paperworks.services.router.sdr.local_lm import answer_and_features
from paperworks.services.router.sdr.remotes import first_line
from paperworks.services.router.spec import ModelSpec
from paperworks.shared.backends import BackendError, InvalidRequest, load_backend
from paperworks.shared.backends.tiny import TinyBackend
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder
from paperworks.shared.devices import autocast
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, PaperworksError
from paperworks.shared.inputs import InputScope

DEFAULT_ANSWER_TOKENS = 256
MAX_ANSWER_TOKENS = 4096


class RemoteCallFailed(PaperworksError):
    """A remote agent's failure, carrying the backend's status code and message."""

    def __init__(self, agent: str, exc: BackendError) -> None:
        super().__init__(f"remote agent {agent!r} failed: {exc.message}")
        self.code = exc.grpc_code_name
        self.retryable = exc.retryable


@dataclass
class Decision:
    agent: str
    index: int
    names: list[str]
    scores: list[float]
    costs: list[float]
    utilities: list[float]
    decision_ms: float
    cost_lambda: float = 0.0
    local_answer: str = ""
    answer: str = ""
    executed: bool = False
    finish_reason: str = ""
    kind: str = "rejector"
    model: dict | None = field(default=None, repr=False)

    @property
    def accepted_local(self) -> bool:
        return self.kind == "sdr" and self.index == 0


class RejectorRouter:
    kind = "rejector"

    def __init__(self, policy: Policy, device: str = "cpu") -> None:
        meta = policy.meta
        self.meta = meta
        self.device = device
        self.agents = meta["agents"]
        self.input = meta["input"]
        self.module = Rejector(self.input["dim"], len(self.agents), meta["hidden"])
        self.module.load_state_dict(policy.state("rejector"))
        self.module.to(device).eval()

    def features(self, text: str | None, features: np.ndarray | None) -> np.ndarray:
        if self.input["kind"] == "minilm":
            if not text:
                raise InvalidArgument("text", "this policy routes text (it was trained on MiniLM embeddings)")
            from paperworks.services.router.embed import minilm

            return minilm(self.device).embed([text])
        if features is None:
            raise InvalidArgument(
                "features", f"this policy routes feature vectors of length {self.input['dim']}"
            )
        return _check_features(features, self.input["dim"])

    @torch.no_grad()
    def decide(self, x: np.ndarray) -> Decision:
        start = time.perf_counter()
        x = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        scores = torch.softmax(self.module(x), dim=1)[0].cpu().numpy()
        index = int(scores.argmax())
        elapsed = (time.perf_counter() - start) * 1000
        names = [a["name"] for a in self.agents]
        return Decision(
            agent=names[index],
            index=index,
            names=names,
            scores=scores.tolist(),
            costs=[a["beta"] for a in self.agents],
            utilities=scores.tolist(),
            decision_ms=elapsed,
            model=self.agents[index]["model"],
        )


class SDRRouter:
    kind = "sdr"

    def __init__(
        self, policy: Policy, open_announced=None, device: str = "cpu", inputs: InputScope | None = None
    ) -> None:
        meta = policy.meta
        self.meta = meta
        self.device = device
        self.options = meta["options"]
        self.costs = np.array([o["cost"] for o in self.options])
        d = meta["decider"]
        self.module = QualityHeads(d["dim"], d["projected"], d["options"], d["hidden"])
        self.module.load_state_dict(policy.state("decider"))
        self.module.to(device).eval()
        local = meta["local"]
        if "embedded_tiny" in local:
            lm = TinyDecoder(TinyConfig(**local["embedded_tiny"]))
            lm.load_state_dict(policy.state("local"))
            self.backend = TinyBackend(lm, device=device)
        elif "announced" in local:
            if open_announced is None:
                raise FailedPrecondition("the local model is another job's: loading it needs the job store")
            source = local["announced"]
            self.backend = open_announced(source["service"], source["job_id"], "policy_job_id")[1]
        else:
            ref = ModelSpec(**local["model"]).local_ref(inputs, "router", "policy_job_id")
            self.backend = load_backend(dataclasses.replace(ref, device=device))
        self.validation_curve = [
            OperatingPoint(p["lambda"], p["cost"], p["quality"], p["accept_rate"])
            for p in meta["validation_curve"]
        ]
        self._lock = threading.Lock()  # one local model, shared across server threads

    def cost_lambda(self, cost_lambda: float | None, budget: float | None) -> float:
        if cost_lambda is not None:
            return cost_lambda
        if budget is not None:
            return lambda_for_budget(self.validation_curve, budget)
        return float(self.meta["default_lambda"])

    def local(self, text: str) -> tuple[str, np.ndarray]:
        if not text:
            raise InvalidArgument("text", "an SDR policy routes text: the local model answers it first")
        try:
            with self._lock, autocast(self.device):
                answers = answer_and_features(
                    self.backend,
                    [text],
                    max_new_tokens=self.meta["max_new_tokens"],
                    layers=self.meta["layers"],
                )
        except InvalidRequest as exc:
            raise InvalidArgument("text", exc.reason) from exc
        return answers.texts[0], answers.features

    @torch.no_grad()
    def decide(self, x: np.ndarray, lam: float) -> Decision:
        start = time.perf_counter()
        x = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        quality = torch.sigmoid(self.module(x))[0].cpu().numpy()
        utility = quality - lam * self.costs
        index = int(utility.argmax())
        elapsed = (time.perf_counter() - start) * 1000
        names = [o["name"] for o in self.options]
        return Decision(
            agent=names[index],
            index=index,
            names=names,
            scores=quality.tolist(),
            costs=self.costs.tolist(),
            utilities=utility.tolist(),
            decision_ms=elapsed,
            cost_lambda=lam,
            model=self.options[index]["model"],
            kind="sdr",
        )


def load_router(
    policy: Policy, open_announced=None, device: str = "cpu", inputs: InputScope | None = None
) -> RejectorRouter | SDRRouter:
    """The policy as a router, its modules (and an SDR policy's local LM) on `device`;
    `open_announced` (service, job id, field) -> (artifact, backend) loads a local model that
    another service's job announced; `inputs` (the caller's) resolves a local model's upload."""
    # Policies are tiny: intra-op threads only contend with the concurrent Route calls that already
    # use the cores, so the serving process runs torch single-threaded.
    torch.set_num_threads(1)
    if policy.kind == "rejector":
        return RejectorRouter(policy, device)
    if policy.kind == "sdr":
        return SDRRouter(policy, open_announced, device, inputs)
    raise FailedPrecondition(f"unknown policy kind {policy.kind!r}")


def route(
    router: RejectorRouter | SDRRouter,
    *,
    text: str | None = None,
    features: np.ndarray | None = None,
    cost_lambda: float | None = None,
    budget: float | None = None,
    execute: bool = False,
    timeout_s: float | None = None,
    max_answer_tokens: int | None = None,
    first_line_only: bool = False,
    inputs: InputScope | None = None,
) -> Decision:
    """The decision for one request and, with `execute`, the chosen agent's answer (an hf / tiny
    agent's folder made local for the caller's tenant, `inputs`, and run on the router's device)."""
    if cost_lambda is not None and cost_lambda < 0:
        raise InvalidArgument("cost_lambda", f"must be >= 0, got {cost_lambda}")
    if budget is not None and budget < 0:
        raise InvalidArgument("budget", f"must be >= 0, got {budget}")
    if timeout_s is not None and timeout_s <= 0:
        raise InvalidArgument("timeout_s", f"must be > 0, got {timeout_s}")
    if max_answer_tokens is not None and not 1 <= max_answer_tokens <= MAX_ANSWER_TOKENS:
        raise InvalidArgument(
            "max_answer_tokens", f"must be in 1..{MAX_ANSWER_TOKENS}, got {max_answer_tokens}"
        )
    if isinstance(router, RejectorRouter):
        if cost_lambda is not None or budget is not None:
            raise InvalidArgument(
                "cost_lambda" if cost_lambda is not None else "budget",
                "a cost preference applies to SDR policies only; a rejector's costs are fixed at training",
            )
        decision = router.decide(router.features(text, features))
    else:
        if features is not None:
            raise InvalidArgument("features", "an SDR policy routes text: the local model answers it first")
        answer, x = router.local(text or "")
        decision = router.decide(x, router.cost_lambda(cost_lambda, budget))
        decision.local_answer = answer
        if decision.index == 0:
            decision.answer = answer
            return decision
    if execute:
        decision.answer, decision.finish_reason = call_agent(
            decision,
            text,
            timeout_s,
            max_answer_tokens=max_answer_tokens or DEFAULT_ANSWER_TOKENS,
            first_line_only=first_line_only,
            inputs=inputs,
            device=router.device,
        )
        decision.executed = True
    return decision


def call_agent(
    decision: Decision,
    text: str | None,
    timeout_s: float | None,
    *,
    max_answer_tokens: int = DEFAULT_ANSWER_TOKENS,
    first_line_only: bool = False,
    inputs: InputScope | None = None,
    device: str = "cpu",
) -> tuple[str, str]:
    """The one remote call of a request (the chosen agent's model, over its `api`): (answer, finish
    reason); its error surfaced precisely."""
    if decision.model is None:
        raise FailedPrecondition(
            f"agent {decision.agent!r} has no model to call (it is simulated or the "
            "base predictor); route without execute"
        )
    if not text:
        raise InvalidArgument("text", "executing a remote call needs the request text")
    ref = dataclasses.replace(ModelSpec(**decision.model).local_ref(inputs, "router", "policy_job_id"),
                              device=device)
    if timeout_s is not None:
        ref = dataclasses.replace(ref, timeout_s=timeout_s)
    try:
        with load_backend(ref) as backend:
            generation = backend.generate(
                [text],
                max_new_tokens=max_answer_tokens,
                temperature=0.0,
                stop=["\n"] if first_line_only else [],
                logprobs=False,
            )[0]
    except BackendError as exc:
        raise RemoteCallFailed(decision.agent, exc) from exc
    answer = first_line(generation.text) if first_line_only else generation.text.strip()
    return answer, generation.finish_reason


def _check_features(features: np.ndarray, dim: int) -> np.ndarray:
    if features.ndim == 1:
        features = features[None, :]
    if features.ndim != 2 or features.shape != (1, dim):
        raise InvalidArgument("features.shape", f"must be [{dim}] or [1, {dim}], got {list(features.shape)}")
    if not np.isfinite(features).all():
        raise InvalidArgument("features.data", "must be finite")
    return features.astype(np.float32)
