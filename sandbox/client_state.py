"""What the sandbox keeps about clients beside the partition logs: consumer groups (Kafka's
`__consumer_offsets`) and client quota configs (Kafka's metadata log), saved in the state dir
next to `state.json` so they survive restarts."""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kreassign.cluster.errors import InputError
from kreassign.sandbox.client_quotas import ClientQuotas, QuotaConfigs
from kreassign.sandbox.groups import GroupCoordinator
from kreassign.sandbox.private_files import write_private

GROUPS_FILE = "groups.json"
QUOTAS_FILE = "client_quotas.json"


@dataclass
class ClientState:
    groups: GroupCoordinator = field(default_factory=GroupCoordinator)
    quotas: ClientQuotas = field(default_factory=ClientQuotas)

    @classmethod
    def load(cls, state_dir: Path | None, now: float, default_quotas: Mapping[str, float] | None = None
             ) -> ClientState:
        """The saved groups and quotas of `state_dir` (none: empty), then the `--client-quota` defaults.

        Raises:
            InputError: a saved file cannot be read.
        """
        out = cls()
        if state_dir is not None:
            try:
                path = state_dir / GROUPS_FILE
                if path.exists():
                    out.groups = GroupCoordinator.from_json(json.loads(path.read_text()), now)
                path = state_dir / QUOTAS_FILE
                if path.exists():
                    out.quotas = ClientQuotas(QuotaConfigs.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(f"cannot read {path}: {exc}; delete it or start with --fresh") from exc
        for key, rate in (default_quotas or {}).items():
            out.quotas.set_default(key, rate)
        return out

    def snapshot(self) -> dict[str, str]:
        """File name -> JSON text (taken under the sandbox lock; written by `write`)."""
        return {GROUPS_FILE: json.dumps(self.groups.to_json(), separators=(",", ":")),
                QUOTAS_FILE: json.dumps(self.quotas.configs.to_json(), separators=(",", ":"))}

    @staticmethod
    def write(state_dir: Path, snapshot: Mapping[str, str]) -> None:
        for name, text in snapshot.items():
            tmp = state_dir / (name + ".tmp")
            write_private(tmp, text)
            os.replace(tmp, state_dir / name)
