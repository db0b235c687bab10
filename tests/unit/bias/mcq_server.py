"""The shared fake OpenAI server (tests/unit/backends/fake_openai.py) answering MCQ prompts like a
model that knows some answers, on both routes, with the fake's usage, finish_reason and scripted
errors. Used by the MCQ HTTP unit tests and the bias integration test."""

from __future__ import annotations

import re

from unit.backends.fake_openai import FakeOpenAIServer, Reply


def last_question(prompt: str) -> tuple[list[str], list[str]]:
    """(labels, options) of the question the prompt leaves open (after the last 'Q:')."""
    block = prompt.rsplit("Q:", 1)[1]
    found = re.findall(r"^([A-Z]\.|-) (.+)$", block, flags=re.MULTILINE)
    return [label.rstrip(".") for label, _ in found], [text for _, text in found]


def knowing_answer(prompt: str, known: set[str]) -> str:
    """A model that knows the answers in `known`: the letter (standard) or the text (M&D); else
    the first option."""
    labels, options = last_question(prompt)
    k = next((i for i, o in enumerate(options) if o in known), 0)
    return labels[k] if labels[k] != "-" else options[k]


class MCQServer(FakeOpenAIServer):
    """Answers MCQ prompts like a model that knows them; echo requests (label scoring) keep the
    fake's deterministic per-character logprobs, or get none with `echo_logprobs=False`."""

    def __init__(self, known: set[str], **kw) -> None:
        super().__init__(**kw)
        self.known = set(known)
        self.echo_logprobs = True

    def _answer(self, method, path, headers, payload):
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return super()._answer(method, path, headers, payload)
        if path == "/v1/completions" and payload.get("echo"):
            reply = super()._answer(method, path, headers, payload)
            if not self.echo_logprobs:
                reply.body["choices"][0].pop("logprobs", None)
            return reply
        usage = {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53}
        if path == "/v1/chat/completions":
            answer = knowing_answer(payload["messages"][-1]["content"], self.known)
            content = f"The correct option is:\n**{answer}**"  # how chat models answer: not on one line
            message = {"role": "assistant", "content": content}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return Reply(body={"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage})
        text = " " + knowing_answer(payload["prompt"], self.known)
        choice = {"index": 0, "text": text, "finish_reason": "stop"}
        return Reply(body={"id": "c", "object": "text_completion", "choices": [choice], "usage": usage})
