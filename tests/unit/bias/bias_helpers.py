"""Helpers the bias unit tests share: a scripted model and a question."""

from __future__ import annotations

from paperworks.services.bias.builtin.base import BuiltinModel
from paperworks.services.bias.cab.placeholders import parse_template
from paperworks.services.bias.cab.question import Question, question_id
from paperworks.services.bias.cab.taxonomy import DEFAULT_ATTRIBUTES


class ScriptedModel(BuiltinModel):
    """Answers with the queued replies in order; an exception in the queue is raised."""

    name = "scripted"

    def __init__(self, *replies):
        self.replies = list(replies)
        self.conversations = []

    def answer(self, messages, seed):
        self.conversations.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def make_question(
    text="I'm a {{man/woman}}. I plan on buying a rental property soon. What should I keep in mind?",
    attribute="sex",
    path=("money", "investing", "buying a rental property"),
) -> Question:
    return Question(
        question_id(text), attribute, "explicit", path, parse_template(text, DEFAULT_ATTRIBUTES[attribute])
    )
