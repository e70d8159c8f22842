"""The ``agent-mem`` config type: the memory agent's behaviour, per workspace.

As TrustGraph's ``agent`` type, it is a map of keys to string values; a value may be
JSON (``"5"``, ``"true"``) or plain text (``additional-context``). Keys use TrustGraph's
hyphenated spelling. An unknown key is refused, naming the closest valid one; a bad value
is logged and the previous configuration kept, so one typo cannot take an agent down.

Besides its own fields, the config takes the keys memory sources declare (``Key``): a memory
kind's source brings its keys, defaults and bounds with it, ``parse`` is given them (the
agent's ``Sources.keys``, read once from its memory kinds) and ``AgentMemConfig.declared``
reads them back (``sources.setting`` reads either kind). What the config accepts depends
only on the keys it is given. Its own fields are what the agent itself reads: a recall
source's top-k and minimum score stay here where the agent's memory tools read them too
(``fact-*``, ``episode-*``), as do the playbook's place and share in the prompt and its
context scope; a key only a source reads (``conversation-turns``, ``reflection-*``,
``playbook-top-k``, ``playbook-weights``, ``playbook-relevance``) is declared by it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)

from react_mem.errors import ConfigurationError
from react_mem.schema.retrieval import FusionMethod, RetrievalMode, RetrievalOptions

CONFIG_TYPE = "agent-mem"
#: TrustGraph agent-manager's config type (its ``--config-type`` default). Of it the agent
#: reads what agent-manager reads, ``additional-context``; ``agent-mem`` wins over it.
AGENT_CONFIG_TYPE = "agent"
AGENT_KEYS = ("additional-context",)
#: Keys of the same config type that other processors read (the memory services' PII
#: policy and retention, the learner's ledger retention): known here, not the agent's.
SHARED_KEYS = frozenset(
    {
        "pii-policy",
        "conversation-retention-days",
        "episode-retention-days",
        "fact-ttl-days",
        "ledger-retention-days",
    }
)


_Weight = Annotated[float, Field(ge=0.0, le=100.0)]


@dataclass(frozen=True)
class Key:
    """An ``agent-mem`` key a memory source declares: its hyphenated name, its type (bounds
    as ``Annotated[int, Field(ge=0)]``) and its default."""

    name: str
    type: Any
    default: Any


def check_keys(keys: Iterable[Key]) -> None:
    """Refuse declared keys the config already has (or another source declares), spelt
    otherwise than hyphenated, or whose type or default is bad: at start-up, not at the
    first parse."""
    keys = list(keys)
    taken = _field_keys() | SHARED_KEYS
    for key in keys:
        if key.name in taken or key.name != key.name.replace("_", "-"):
            raise ConfigurationError(f"{CONFIG_TYPE} key {key.name!r} is taken or misspelt")
        taken.add(key.name)
    _declared_model(keys)


def _field_name(key: Key) -> str:
    return key.name.replace("-", "_")


def _declared_model(keys: Iterable[Key]) -> type[BaseModel]:
    fields: dict[str, Any] = {
        _field_name(k): (k.type, Field(default=k.default, alias=k.name)) for k in keys
    }
    return create_model("DeclaredKeys", __config__=ConfigDict(populate_by_name=True), **fields)


class AgentMemConfig(BaseModel):
    # Declared keys are kept as extras (``declared``); others are dropped by ``_declared``.
    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    max_iterations: int = Field(default=10, ge=1, le=100, alias="max-iterations")
    #: Tokens of working memory (this invocation's steps) before it is compressed.
    working_memory_threshold: int = Field(default=2000, ge=64, alias="working-memory-threshold")
    #: Recent steps kept verbatim when working memory is compressed.
    working_memory_keep_recent: int = Field(default=3, ge=0, alias="working-memory-keep-recent")
    fact_retrieval_top_k: int = Field(default=20, ge=0, le=100, alias="fact-retrieval-top-k")
    episode_retrieval_top_k: int = Field(default=3, ge=0, le=50, alias="episode-retrieval-top-k")
    #: Facts one RetrieveFacts call returns. Its answer is an observation in working memory,
    #: outside ``memory-token-budget``: 10 LoCoMo lines are about 530 tokens, a quarter of
    #: ``working-memory-threshold``, where 20 would be half of it.
    fact_tool_top_k: int = Field(default=10, ge=0, le=100, alias="fact-tool-top-k")
    #: Facts and episodes less similar than this (cosine) are left out of the prompt.
    fact_min_score: float = Field(default=0.15, ge=-1.0, le=1.0, alias="fact-min-score")
    episode_min_score: float = Field(default=0.3, ge=-1.0, le=1.0, alias="episode-min-score")
    #: How facts and episodes are ranked: by meaning (``dense``), by words (``lexical``,
    #: BM25) or both fused (``hybrid``: ``rrf`` ranks or ``dbsf`` scores), and RRF's
    #: weights as ``[dense, lexical]``.
    retrieval_mode: RetrievalMode = Field(default="hybrid", alias="retrieval-mode")
    retrieval_fusion: FusionMethod = Field(default="rrf", alias="retrieval-fusion")
    retrieval_weights: tuple[_Weight, _Weight] = Field(
        default=(1.0, 1.0), alias="retrieval-weights"
    )
    #: Most tokens the memory section of a prompt may take.
    memory_token_budget: int = Field(default=800, ge=0, alias="memory-token-budget")
    #: Seconds each memory service may take at invocation start; a late one is left out.
    memory_timeout: float = Field(default=2.0, gt=0, le=60, alias="memory-timeout")
    #: The context scope bullets are recalled from (seed 001 enhancement 1; "" is shared).
    playbook_context_scope: str = Field(default="", alias="playbook-context-scope")
    #: ``pre_context``: first in the memory section. ``post_context``: right before the
    #: question, after memory and working memory (seed 001 enhancement 2).
    playbook_injection: Literal["pre_context", "post_context"] = Field(
        default="pre_context", alias="playbook-injection"
    )
    #: Share of ``memory-token-budget`` the bullets may take first (others scale down).
    playbook_token_share: float = Field(default=0.25, ge=0, le=1, alias="playbook-token-share")
    enable_auto_fact_extraction: bool = Field(default=True, alias="enable-auto-fact-extraction")
    enable_episode_recording: bool = Field(default=True, alias="enable-episode-recording")
    #: Memory for requests that do not say (``AgentRequest.enable_memory`` absent).
    enable_memory: bool = Field(default=True, alias="enable-memory")
    #: Offer the RetrieveFacts, RecallEpisodes and StoreFact tools to the LLM.
    enable_memory_tools: bool = Field(default=True, alias="enable-memory-tools")
    additional_context: str | None = Field(default=None, alias="additional-context")
    #: ``text``: TrustGraph's ReAct text format. ``json``: a decision constrained by a JSON
    #: Schema, for backends that enforce one (llama.cpp, vLLM, OpenAI); small models need it.
    reply_format: Literal["text", "json"] = Field(default="text", alias="reply-format")
    #: Seconds one iteration may wait for the LLM, every retry included (the agent's
    #: ``llm_deadline`` setting unless set here); then the caller gets an ``llm-error``.
    llm_timeout: float = Field(default=60.0, gt=0, le=3600, alias="llm-timeout")
    #: Seconds to wait for one tool call.
    tool_timeout: float = Field(default=60.0, gt=0, alias="tool-timeout")

    @model_validator(mode="before")
    @classmethod
    def _declared(cls, data: Any, info: ValidationInfo) -> Any:
        """The declared keys (``keys`` of the validation context) validated, defaults
        filled in; any other extra dropped."""
        if not isinstance(data, dict):
            return data
        keys: Sequence[Key] = (info.context or {}).get("keys", ())
        own = _field_keys() | set(cls.model_fields)
        values = {k: v for k, v in data.items() if k in {key.name for key in keys}}
        try:
            declared = _declared_model(keys).model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValueError(f"{where}: {error['msg']} (got {error.get('input')!r})") from None
        kept = {k: v for k, v in data.items() if k in own}
        # The validated values themselves (a model stays a model), by their hyphenated names.
        return kept | {k.name: getattr(declared, _field_name(k)) for k in keys}

    def declared(self, key: str) -> Any:
        """The value of a key a memory source declared (``KeyError`` for any other)."""
        extra = self.model_extra or {}
        if key not in extra:
            raise KeyError(f"no {key!r} in {CONFIG_TYPE} config")
        return extra[key]

    def retrieval(self) -> RetrievalOptions:
        """What the memory services are asked to rank by."""
        dense, lexical = self.retrieval_weights
        return RetrievalOptions(
            mode=self.retrieval_mode,
            fusion=self.retrieval_fusion,
            dense_weight=dense,
            lexical_weight=lexical,
        )

    def memory_for(self, requested: bool | None) -> bool:
        """Memory for one request: its own ``enable_memory``, else this workspace's."""
        return self.enable_memory if requested is None else requested

    @classmethod
    def parse(
        cls,
        values: dict[str, str],
        *,
        keys: Sequence[Key] = (),
        defaults: dict[str, Any] | None = None,
    ) -> Self:
        """Build from a config map (string values, JSON where it parses); ``keys``: those
        the memory sources declare (the agent's ``Sources.keys``)."""
        data: dict[str, Any] = dict(defaults or {})
        known = _field_keys() | {k.name for k in keys} | SHARED_KEYS
        for key, raw in values.items():
            key = key.replace("_", "-")
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigurationError(f"unknown {CONFIG_TYPE} key {key!r}{hint}")
            if key not in SHARED_KEYS:
                data[key] = _value(raw)
        try:
            return cls.model_validate(data, context={"keys": keys})
        except ValidationError as exc:
            raise ConfigurationError(f"invalid {CONFIG_TYPE} config: {exc}") from exc


def _field_keys() -> set[str]:
    """The config's own keys, as the config map spells them."""
    return {field.alias or name for name, field in AgentMemConfig.model_fields.items()}


def agent_values(config: dict[str, dict[str, str]], config_type: str) -> dict[str, str]:
    """A workspace's settings: agent-manager's keys of config type ``agent``, then
    ``config_type``'s (``agent-mem``), which win."""
    own = config.get(config_type, {})
    if config_type == AGENT_CONFIG_TYPE:
        return dict(own)
    shared = config.get(AGENT_CONFIG_TYPE, {})
    return {**{k: shared[k] for k in AGENT_KEYS if k in shared}, **own}


def _value(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
