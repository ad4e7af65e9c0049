"""What a controller handler may use of its service (``ctx.node``): the controller side of ``..context``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..context import RequestContext

if TYPE_CHECKING:
    from ..clock import Clock
    from ..config import BrokerConfig
    from .quorum import RaftDriver
    from .quorum_controller import QuorumController


class ControllerView(Protocol):
    """The controller process as controller handlers see it (implemented by ``service.ControllerService``)."""

    config: BrokerConfig
    clock: Clock
    controller: QuorumController
    raft: RaftDriver | None      # the metadata quorum's driver (None: a single controller)
    host: str
    port: int


ControllerContext = RequestContext[ControllerView]    # a controller handler's context
