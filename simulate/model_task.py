"""One Spark task per scenario: moves and brokers cogrouped by scenario, run through the
replication model with `applyInPandas` (Arrow in, Arrow out)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.client_impact import ClientModel
from kreassign.simulate.scenarios import Scenario
from kreassign.simulate.schemas import MODEL_MOVES, SCENARIO_RESULT, columns


def model_moves(moves: DataFrame, scenarios: DataFrame) -> DataFrame:
    """Every move once per scenario (MOVES, SCENARIOS -> MODEL_MOVES)."""
    return (moves.crossJoin(F.broadcast(scenarios.select("scenario_id")))
            .select(*columns(MODEL_MOVES)))


class ScenarioTask:
    """The function each task runs: pandas frames of one scenario in, one result row out.

    Rows arrive in no particular order, so both sides are sorted (brokers by id, moves by plan
    order) before the model runs: the same scenario gives the same numbers on any cluster.
    """

    def __init__(self, scenarios: Mapping[int, Scenario], clients: ClientModel, points: int) -> None:
        self.scenarios = dict(scenarios)
        self.clients = clients
        self.points = points

    def __call__(self, moves: pd.DataFrame, brokers: pd.DataFrame) -> pd.DataFrame:
        from kreassign.simulate.scenario_run import ScenarioArrays, run_scenario, scenario_row

        if brokers.empty:
            return pd.DataFrame({f.name: pd.Series(dtype=object) for f in SCENARIO_RESULT.fields})
        scenario_id = int(brokers["scenario_id"].iloc[0])
        brokers = brokers.sort_values("broker", kind="stable")
        moves = moves.sort_values("move_id", kind="stable")

        def col(frame: pd.DataFrame, name: str, dtype: type) -> np.ndarray:
            return frame[name].to_numpy(dtype=dtype)

        arrays = ScenarioArrays(
            broker_ids=col(brokers, "broker", np.int64),
            network_in=col(brokers, "network_in_bps", np.float64),
            network_out=col(brokers, "network_out_bps", np.float64),
            client_in=col(brokers, "client_in_bps", np.float64),
            client_out=col(brokers, "client_out_bps", np.float64),
            replication_in=col(brokers, "replication_in_bps", np.float64),
            replication_out=col(brokers, "replication_out_bps", np.float64),
            leader_base=col(brokers, "leader_base_bps", np.float64),
            leader_rate=col(brokers, "leader_rate_bps", np.float64),
            follower_rate=col(brokers, "follower_rate_bps", np.float64),
            move_id=col(moves, "move_id", np.int64),
            source=col(moves, "source", np.int64),
            dest=col(moves, "dest", np.int64),
            bytes=col(moves, "bytes", np.int64),
            write_bps=col(moves, "write_bps", np.float64),
            failover_source=col(moves, "failover_source", np.int64),
        )
        run = run_scenario(arrays, self.scenarios[scenario_id], self.points)
        row = scenario_row(scenario_id, arrays, run, self.clients)
        return pd.DataFrame({name: [value] for name, value in row.items()})


def simulate_scenarios(moves: DataFrame, per_broker: DataFrame, scenarios: Sequence[Scenario],
                       clients: ClientModel, points: int) -> DataFrame:
    """One model task per scenario (MODEL_MOVES, MODEL_BROKERS -> SCENARIO_RESULT)."""
    task = ScenarioTask({s.scenario_id: s for s in scenarios}, clients, points)

    # A plain function: Spark reads the arity to choose between (left, right) and (key, left, right).
    def run(moves: pd.DataFrame, brokers: pd.DataFrame) -> pd.DataFrame:
        return task(moves, brokers)

    return (
        moves.groupBy("scenario_id")
        .cogroup(per_broker.groupBy("scenario_id"))
        .applyInPandas(run, schema=SCENARIO_RESULT)
    )
