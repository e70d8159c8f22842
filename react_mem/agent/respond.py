"""The AgentResponse stream in TrustGraph's shape.

Non-streaming: one message per thought and observation (``end_of_message``), then the
answer with ``end_of_message`` and ``end_of_dialog``. Streaming: chunks of one message id
with ``end_of_message`` false, the last of each message marked; the answer's chunks end
with an empty terminal answer carrying both flags. Errors: ``error`` with end_of_dialog.

Ids and error types are agent-manager's: message ids are its provenance URIs (the answer's
``agent_final_uri``, ``urn:trustgraph:agent:<session>/final``), and every error is of type
``agent-error``, react-mem's own kind (``llm-error``, ``invalid``, ``malformed``) leading
its message.

Explainability is agent-manager's too (:mod:`react_mem.agent.explain`): the question, each
action, observation and the conclusion as ``explain`` messages carrying their provenance
triples, the same triples sent to the flow's ``explainability`` queue when it has one; and
react-mem's memory context (what memory the prompt held, with scores). Unlike agent-manager,
nothing of it waits on the librarian or the queue: both are after-reply work.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from react_mem.agent import explain
from react_mem.bus.transport import Receipt
from react_mem.processor.context import MessageContext
from react_mem.schema import AgentResponse, Error
from react_mem.schema.agent import MemoryRef
from react_mem.schema.primitives import Triple
from react_mem.schema.services import (
    DocumentMetadata,
    LibrarianRequest,
    LibrarianResponse,
    Metadata,
    Triples,
)
from react_mem.schema.trajectory import PARSE_ERROR_ACTION

TriplesFor = Callable[[str | None], list[Triple]]
#: The flow's producer for provenance triples (agent-manager's spec name).
EXPLAINABILITY = "explainability"
#: The librarian, where agent-manager keeps thought, observation and answer texts.
LIBRARIAN = "librarian-request"
LIBRARIAN_TIMEOUT = 10.0
#: Client specs the responder uses: (service, request, response schemas).
DOCUMENT_CLIENTS: tuple[tuple[str, type[Any], type[Any]], ...] = (
    ("librarian", LibrarianRequest, LibrarianResponse),
)

ERROR_TYPE = "agent-error"


@dataclass(frozen=True)
class Document:
    """A text agent-manager keeps in the librarian (a thought, an observation, an answer)."""

    id: str
    text: str
    title: str


def error_response(message: str, *, kind: str = ERROR_TYPE) -> AgentResponse:
    """agent-manager's error reply; a ``kind`` other than ``agent-error`` leads the message
    (unless the message names it already, as a service's error passed on does)."""
    if kind != ERROR_TYPE and f"{kind}:" not in message:
        message = f"{kind}: {message}"
    return AgentResponse(
        message_type="error",
        content=message,
        end_of_message=True,
        end_of_dialog=True,
        error=Error(type=ERROR_TYPE, message=message),
    )


class Responder:
    def __init__(
        self,
        ctx: MessageContext,
        session_id: str,
        iteration: int,
        streaming: bool,
        *,
        collection: str = "default",
        question: str = "",
    ):
        self.ctx, self.streaming, self.question_text = ctx, streaming, question
        self.session, self.iteration, self.collection = session_id, iteration, collection
        self.thought_id = explain.thought_uri(session_id, iteration)
        self.observation_id = explain.observation_uri(session_id, iteration)
        self.answer_id = explain.final_uri(session_id)
        self.in_token: int | None = None
        self.out_token: int | None = None
        self.model: str | None = None
        #: The memory the prompt held (the invocation's), for the conclusion's provenance.
        self.used: list[MemoryRef] = []
        self._thought_open = False
        self._acted = False
        #: The question's provenance, still being sent (see :meth:`question`).
        self._ahead: asyncio.Future[None] | None = None
        #: The conclusion's triples and answer document once its event is sent (``conclude``).
        self._concluded: tuple[TriplesFor, Document | None] | None = None

    async def _reply(self, response: AgentResponse, *, ahead: bool = False) -> None:
        """``response`` on the stream, after the question's provenance (``ahead``: it is
        that provenance): the caller sees the messages in the order they were made."""
        await self._replies([response], ahead=ahead)

    async def _replies(self, responses: list[AgentResponse], *, ahead: bool = False) -> None:
        """:meth:`_reply` of each of ``responses`` in turn, each queued behind the one
        before without waiting for the broker's receipt of it (one producer sends them in
        order); returns once every one is received, raising the first failure."""
        if not ahead:
            await self.settled()
        receipts: list[Receipt] = []
        try:
            for response in responses:
                receipts.append(await self.ctx.reply_queued(response))
        finally:
            results = await asyncio.gather(*receipts, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def settled(self) -> None:
        """Wait until the question's provenance is sent (raising what its send raised). The
        handler's end waits for it too, so nothing of its stream goes out after that."""
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            await ahead

    # -- explainability ----------------------------------------------------------------
    # The caller's ``explain`` events go out in the stream at once; the same provenance for
    # the flow's explainability queue (TrustGraph's triples store), and the texts for its
    # librarian, are the flow's after-reply work (:mod:`react_mem.processor.background`):
    # a slow or absent librarian adds nothing to an answer. The events name a document the
    # agent is saving; the triples stored name it only once the librarian has it.
    def _explain(
        self, uri: str, triples_for: TriplesFor, document: Document | None = None
    ) -> AgentResponse:
        """The ``explain`` event of ``uri`` for the stream; its triples and ``document`` go
        to the flow's explainability queue and librarian as after-reply work."""
        self._record(uri, triples_for, document)
        return _event(uri, triples_for, document)

    def _record(self, uri: str, triples_for: TriplesFor, document: Document | None) -> None:
        """``uri``'s triples to the flow's explainability queue, and ``document`` to its
        librarian, as after-reply work (when the flow has them)."""
        flow = self.ctx.flow
        to_graph = flow.has_producer(EXPLAINABILITY)
        if to_graph or document is not None:

            async def record() -> None:
                saved = await self._save(document) if document is not None else None
                if to_graph:
                    metadata = Metadata(id=uri, collection=self.collection)
                    triples = Triples(metadata=metadata, triples=triples_for(saved))
                    await flow.send(EXPLAINABILITY, triples)

            flow.background.submit("provenance", record)

    def question(self, question: str, used: list[MemoryRef]) -> None:
        """An invocation's start: the question, then the memory recalled into the prompt.
        Sent while the LLM is asked (the memory's hundreds of triples cost milliseconds
        to build and send), ahead of every later message of the stream."""
        self._ahead = asyncio.ensure_future(self._question(question, used))

    async def _question(self, question: str, used: list[MemoryRef]) -> None:
        session = self.session
        uri, triples = explain.session_uri(session), explain.session_triples(session, question)
        events = [self._explain(uri, lambda _: triples)]
        if used:
            memory = explain.memory_triples(session, used)
            events.append(self._explain(explain.memory_uri(session), lambda _: memory))
        await self._replies(events, ahead=True)

    async def action(
        self, name: str, arguments: dict[str, str], thought: str = "", *, say: bool = False
    ) -> None:
        """The iteration's analysis, before its tool runs (agent-manager's ``on_action``);
        ``say``: the ``thought`` itself first (or, streaming, its end), queued with it."""
        self._acted = True
        session, iteration = self.session, self.iteration
        analysis = self._explain(
            explain.iteration_uri(session, iteration),
            lambda doc: explain.iteration_triples(session, iteration, name, arguments, doc),
            self._document(self.thought_id, thought, f"Agent Thought: {name}"),
        )
        await self._replies([*(self._thought(thought) if say else []), analysis])

    def _document(self, document_id: str, text: str, title: str) -> Document | None:
        """A text for the flow's librarian (agent-manager's ``save_document``), if it has one."""
        if not text or not self.ctx.flow.has_client(LIBRARIAN):
            return None
        return Document(document_id, text, title)

    async def _save(self, document: Document) -> str | None:
        """``document`` stored in the librarian: its id, or ``None`` when that failed."""
        metadata = DocumentMetadata(
            id=document.id, kind="text/plain", title=document.title, document_type="answer"
        )
        request = LibrarianRequest(
            operation="add-document",
            document_id=document.id,
            document_metadata=metadata,
            content=base64.b64encode(document.text.encode()).decode("ascii"),
        )
        background = self.ctx.flow.background
        try:
            response: LibrarianResponse = await self.ctx.flow.client(LIBRARIAN).request(
                request, timeout=LIBRARIAN_TIMEOUT
            )
        except Exception as exc:  # noqa: BLE001 - the provenance links no document
            background.dropped("librarian", "failed", exc)
            return None
        if response.error is not None:
            background.dropped("librarian", f"refused: {response.error.type}")
            return None
        return document.id

    async def stream_chunk(self, kind: str, text: str) -> None:
        """A piece of a streamed reply: thought text, then (for a final reply) answer text."""
        if kind == "thought":
            self._thought_open = True
            await self._reply(_message("thought", text, self.thought_id))
        else:
            await self._replies([*self._thought_end(), _message("answer", text, self.answer_id)])

    def _thought_end(self) -> list[AgentResponse]:
        """The end of a thought streamed in chunks, if one is open."""
        if not self._thought_open:
            return []
        self._thought_open = False
        return [_message("thought", "", self.thought_id, end=True)]

    def _thought(self, text: str) -> list[AgentResponse]:
        if self.streaming:
            return self._thought_end()
        return [_message("thought", text, self.thought_id, end=True)]

    async def thought(self, text: str) -> None:
        """A whole thought, or (streaming) the end of the one sent in chunks, if still open."""
        messages = self._thought(text)
        if messages:
            await self._replies(messages)

    async def observation(self, text: str, *, error: str | None = None) -> None:
        """The observation, then its provenance (``error``: the tool failed so). A reply
        that did not parse has an analysis too, as in agent-manager."""
        if not self._acted:
            await self.action(PARSE_ERROR_ACTION, {})
        session, iteration = self.session, self.iteration
        observed = _message("observation", text, self.observation_id, end=True)
        provenance = self._explain(
            self.observation_id,
            lambda doc: explain.observation_triples(session, iteration, document=doc, error=error),
            self._document(self.observation_id, text, "Agent Observation"),
        )
        await self._replies([observed, provenance])

    def _final_triples(self) -> TriplesFor:
        session, iteration, used = self.session, self.iteration, bool(self.used)
        in_token, out_token, model = self.in_token, self.out_token, self.model
        return lambda doc: explain.final_triples(
            session,
            iteration,
            in_token=in_token,
            out_token=out_token,
            model=model,
            document=doc,
            memory=used,
        )

    def _answer_document(self, text: str) -> Document | None:
        title = f"Agent Answer: {self.question_text[:50]}..."
        return self._document(explain.answer_document(self.session), text, title)

    async def conclude(self, thought: str, answer: str) -> None:
        """A final reply's thought, then its conclusion's provenance event: sent beside the
        learning hand-off, ahead of the answer (:meth:`answer`). The conclusion's triples
        and its answer document (``answer``'s, named in the event) are stored only once the
        answer is sent: nothing is kept of an answer that is not given."""
        triples_for = self._final_triples()
        document = self._answer_document(answer)
        self._concluded = (triples_for, document)
        conclusion = _event(self.answer_id, triples_for, document)
        await self._replies([*self._thought(thought), conclusion])

    async def answer(self, text: str) -> None:
        """The end of the dialog: the whole answer, or (streaming) the terminal marker,
        after the conclusion's provenance (sent here unless :meth:`conclude` sent it)."""
        messages = []
        if self._concluded is None:
            triples_for, document = self._final_triples(), self._answer_document(text)
            messages.append(_event(self.answer_id, triples_for, document))
        else:
            triples_for, named = self._concluded
            document = None if named is None else dataclasses.replace(named, text=text)
        self._record(self.answer_id, triples_for, document)
        answer = AgentResponse(
            message_type="answer",
            content="" if self.streaming else text,
            end_of_message=True,
            end_of_dialog=True,
            message_id=self.answer_id,
            in_token=self.in_token,
            out_token=self.out_token,
            model=self.model,
        )
        await self._replies([*messages, answer])

    async def error(self, message: str, *, kind: str = ERROR_TYPE) -> None:
        await self._reply(error_response(message, kind=kind))


def _message(kind: str, content: str, message_id: str, *, end: bool = False) -> AgentResponse:
    return AgentResponse(
        message_type=kind, content=content, end_of_message=end, message_id=message_id
    )


def _event(uri: str, triples_for: TriplesFor, document: Document | None) -> AgentResponse:
    """The ``explain`` event of ``uri``, naming ``document`` (which the agent is saving)."""
    return AgentResponse(
        message_type="explain",
        explain_id=uri,
        explain_graph=explain.GRAPH_RETRIEVAL,
        explain_triples=triples_for(document.id if document is not None else None),
    )
