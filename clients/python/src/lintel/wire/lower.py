"""What a writer sends a reader of an older version or fewer features (PROTOCOL.md sections 5,
6 and 8): the nearest variant the reader knows, the older kind of a message, or nothing (a
``Progress`` or ``Session`` to a reader that did not list it). A field the reader cannot
carry is refused (:class:`NeedsVersion`), never dropped.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Collection

from ..errors import NeedsVersion
from . import frames as f
from . import types as t

HEARTBEAT_TIMEOUT = "heartbeat-timeout"
ROLE_NOT_GRANTED = "role-not-granted"
PROGRESS = "progress"
WORKER_RESUME = "worker-resume"


def lower_result(result: Any, version: int, listed: Collection[str] = ()) -> Any:
    """The ``DispatchResult`` a reader of ``version`` that listed ``listed`` is sent."""
    v4 = version >= 4
    if isinstance(result, t.HeartbeatTimeout) and not (v4 and HEARTBEAT_TIMEOUT in listed):
        return t.Timeout(result.worker_id, result.after_ms)
    if isinstance(result, t.Refused):
        reason = result.refused.reason
        R = t.RefusedReason
        if reason == R.RoleNotGranted and not (v4 and ROLE_NOT_GRANTED in listed):
            reason = R.NamespaceNotGranted
        if version < 3 and reason == R.Unsupported:
            reason = R.InvalidRequest
        if version < 3 and reason == R.FairnessCapReached:
            reason = R.TooManyInFlight
        if version < 2 and reason == R.NamespaceNotGranted:
            reason = R.InvalidRequest
        if reason != result.refused.reason:
            return t.Refused(t.RefusedDispatch(reason, result.refused.detail))
        return result
    if isinstance(result, t.NoWorker3) and version < 3:
        return t.NoWorker(census_v2(result.census))
    if isinstance(result, t.NoWorker) and version >= 3:
        c = result.census
        return t.NoWorker3(
            t.Census3(
                c.reason, c.pool_workers, c.serving_activity, c.compatible_workers,
                c.compatible_workers, c.at_capacity, c.excluded, 0, 0, c.last_departure_ms_ago,
            )
        )  # fmt: skip
    if isinstance(result, (t.PeerLost, t.ShutDown)) and version < 2:
        return t.WorkerLost(0)
    return result


def census_v2(c: t.Census3) -> t.Census:
    """A version-3 census as a version-1 or version-2 reader receives it (section 4)."""
    reason = c.reason
    N = t.NoWorkerReason
    if reason in (N.AllUnreachable, N.AllInProbation):
        reason = N.AllExcluded
    elif reason in (N.DeploymentMatchedNobody, N.CapabilityMatchedNobody):
        reason = N.NodeFilterMatchedNobody
    return t.Census(
        reason, c.pool_workers, c.serving_activity, c.deployment_workers, c.at_capacity,
        c.draining + c.probation + c.unreachable, c.last_departure_ms_ago,
    )  # fmt: skip


def lower_frame(frame: Any, version: int, listed: Collection[str] = ()) -> Any | None:
    """The frame a reader of ``version`` that listed ``listed`` is sent in place of ``frame``,
    or ``None`` when it is not sent at all.

    Raises :class:`NeedsVersion` when the frame carries what the reader cannot.
    """
    v4 = version >= 4
    if isinstance(frame, f.Progress):
        return frame if v4 and PROGRESS in listed else None
    if isinstance(frame, f.Session):
        return frame if v4 and WORKER_RESUME in listed else None
    if isinstance(frame, (f.ServedOutcome, f.Outcome, f.RelayOutcome)):
        result = lower_result(frame.result, version, listed)
        if isinstance(frame, f.ServedOutcome) and version < 2:
            return f.Outcome(frame.correlation, result)
        if isinstance(frame, f.Outcome) and version >= 2:
            return f.ServedOutcome(frame.correlation, "", result)
        return dataclasses.replace(frame, result=result)
    if isinstance(frame, f.Submit3) and version < 3:
        _plain_extras(frame.extras, version, allow_scheduling=False)
        return f.Submit(
            frame.correlation, frame.request, frame.wait_for_worker_ms, frame.reply_timeout_ms,
            frame.routing,
        )  # fmt: skip
    if isinstance(frame, f.Push3) and version < 3:
        _plain_extras(frame.extras, version, allow_scheduling=True)
        return f.Push(frame.correlation, frame.request)
    if isinstance(frame, f.Register3) and version < 3:
        if frame.deployment is not None or frame.instance_id is not None or frame.extensions:
            raise NeedsVersion("a deployment, instance id or extension", version)
        return f.Register(
            frame.namespaces, frame.task_queue, frame.node, frame.activity_types,
            frame.identity, frame.max_concurrency,
        )  # fmt: skip
    if isinstance(frame, f.Welcome3) and version < 3:
        return f.Welcome(frame.version, frame.node_id, frame.pid, frame.limits)
    row = f.KIND_OF[type(frame)]
    if row.version > version:
        raise NeedsVersion(f"frame {row.name}", version)
    return frame


def _plain_extras(extras: t.RequestExtras, version: int, allow_scheduling: bool) -> None:
    """Refuses extras a version-2 request cannot carry. Priority and fairness are not
    critical: a push drops them (``allow_scheduling``), a submission refuses them."""
    if extras.headers:
        raise NeedsVersion("headers", version)
    if extras.deployment is not None:
        raise NeedsVersion("deployment", version)
    if extras.extensions:
        raise NeedsVersion("extensions", version)
    if not allow_scheduling and (
        extras.priority is not None or extras.fairness_key is not None or extras.fairness_weight is not None
    ):
        raise NeedsVersion("priority or fairness", version)
