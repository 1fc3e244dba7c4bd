"""Random but realistic pydantic models, seeded, and the JSON Schemas pydantic emits for them:
the schemas Python clients send for structured output. Works with Debian 12's pydantic 1.10
(`.schema()`) and pydantic 2 (`.model_json_schema()`)."""
import datetime
import enum
import random
import uuid
from typing import Dict, List, Literal, Optional, Union

import pydantic

FIELD_NAMES = ["id", "name", "title", "age", "price", "quantity", "status", "tags", "created_at",
               "owner", "score", "rating", "description", "country", "items", "notes", "priority",
               "category", "active", "count", "address", "amount", "language", "steps", "reason",
               "confidence", "answer", "due_date", "user_id", "labels"]
ENUM_WORDS = ["low", "medium", "high", "open", "closed", "pending", "red", "green", "blue",
              "draft", "published", "archived", "admin", "user", "guest"]


class _ModelFactory:
    def __init__(self, rng):
        self.rng = rng
        self.serial = 0

    def _name(self, stem):
        self.serial += 1
        return f"{stem}{self.serial}"

    def _enum_words(self):
        return sorted(set(self.rng.sample(ENUM_WORDS, self.rng.randint(2, 5))))

    def scalar(self):
        rng = self.rng
        roll = rng.randrange(11)
        if roll == 0:
            return str
        if roll == 1:
            low = rng.randint(0, 5)
            return pydantic.constr(min_length=low, max_length=low + rng.randint(1, 40))
        if roll == 2:
            low = rng.randint(-100, 100)
            return pydantic.conint(ge=low, le=low + rng.randint(0, 1000))
        if roll == 3:
            return pydantic.confloat(ge=0, le=rng.randint(1, 100))
        if roll == 4:
            return bool
        if roll == 5:
            return Literal[tuple(self._enum_words())]
        if roll == 6:
            return enum.Enum(self._name("Choice"), {w.upper(): w for w in self._enum_words()}, type=str)
        if roll == 7:
            return datetime.datetime
        if roll == 8:
            return datetime.date
        if roll == 9:
            return uuid.UUID
        return int

    def field(self, depth):
        rng = self.rng
        roll = rng.random()
        if depth < 2 and roll < 0.15:
            kind = self.model(depth + 1)
        elif roll < 0.3:
            low = rng.randint(0, 2)
            item = self.model(depth + 1) if depth < 2 and rng.random() < 0.3 else self.scalar()
            kind = pydantic.conlist(item, min_items=low, max_items=low + rng.randint(1, 6)) \
                if rng.random() < 0.6 else List[item]
        elif roll < 0.37:
            kind = Union[self.scalar(), self.scalar()]
        elif roll < 0.42:
            kind = Dict[str, self.scalar()]
        else:
            kind = self.scalar()
        if rng.random() < 0.2:
            return (Optional[kind], None)
        return (kind, ...)

    def model(self, depth=0):
        fields = {}
        for _ in range(self.rng.randint(1, 7 - depth * 2)):
            fields[self.rng.choice(FIELD_NAMES)] = self.field(depth)
        return pydantic.create_model(self._name("Model"), **fields)


def json_schema(model):
    if hasattr(model, "model_json_schema"):
        return model.model_json_schema()
    return model.schema()


def pydantic_schemas(count, seed):
    """[(id, schema)] for `count` random models, the same for the same seed."""
    factory = _ModelFactory(random.Random(seed))
    return [(f"pydantic/model#{i}", json_schema(factory.model())) for i in range(count)]
