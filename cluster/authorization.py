"""Refusing early: a command that would change the cluster first checks what the connected
principal may do on the CLUSTER resource (DescribeCluster's authorized operations, KIP-430), so
a login without the rights is told so before anything is changed, rather than halfway."""
from __future__ import annotations

from collections.abc import Mapping

from kreassign.cluster.errors import NotAuthorized
from kreassign.cluster.port import ClusterInfo

ALTER = "ALTER"
ALTER_CONFIGS = "ALTER_CONFIGS"
LOCK_ACLS = "READ on the consumer groups kreassign.execution.* and on the topic __consumer_offsets"
"""what the execution lock needs (its marker is an offset those groups commit; READ implies DESCRIBE)"""


def require_cluster_operations(info: ClusterInfo, needed: Mapping[str, str]) -> None:
    """Raise NotAuthorized unless every operation in `needed` (operation -> what it is for) is
    allowed on the CLUSTER. Brokers that do not report authorized operations pass.

    Raises:
        NotAuthorized: naming each missing operation, its resource and why it is needed.
    """
    if info.authorized_operations is None:
        return
    missing = [f"{op} on the CLUSTER ({why})" for op, why in needed.items() if op not in info.authorized_operations]
    if missing:
        raise NotAuthorized(f"Not authorized: the login in --command-config may not {'; nor '.join(missing)}. "
                            "Nothing was changed. Use a login with those ACLs.")
