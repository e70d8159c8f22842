"""The learner's forget client (``memory-forget``): its ledger records of a user."""

from __future__ import annotations

from react_mem.clients.base import Service, ServiceClient, build
from react_mem.schema.forget import MEMORY_FORGET, ForgetRequest, ForgetResponse, Forgotten

LEARNER_FORGET: Service[ForgetRequest, ForgetResponse] = Service(
    MEMORY_FORGET, ForgetRequest, ForgetResponse
)


class LearnerForgetClient(ServiceClient[ForgetRequest, ForgetResponse]):
    """Requests go on the flow's persistent ``memory-forget`` queue, so one sent while the
    learner is down waits there."""

    service = LEARNER_FORGET

    async def forget(self, user: str, *, collection: str = "") -> Forgotten:
        """The user's records in ``collection`` ("": every collection)."""
        response = await self.call(build(ForgetRequest, user=user, collection=collection))
        return response.forgotten or Forgotten()
