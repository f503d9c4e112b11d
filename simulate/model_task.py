"""One model run per scenario on the executors, without shuffling the moves.

The moves and the per-broker base (BROKER_BASE) are the same in every scenario, so both are
packed once into a single row (each table one Arrow IPC stream) and broadcast; `spark.range`
gives every scenario its own partition, each joined with that row, and `mapInArrow` runs the
replication model on each (Arrow in, Arrow out, no pandas and no per-row Python objects). A
task scales the brokers' traffic by its scenario's write load and sets its throttle
(`scenario_brokers`).

Both tables reach that row through the driver (`toArrow`, the JVM's Arrow batches, and back as
a one-row DataFrame): a broadcast collects its rows on the driver anyway. Packing the moves in
Python workers (a worker per partition, Arrow to Python and back, one more job to gather the
chunks) cost 3.5-6 CPU s for 1M moves against 0.9 for this, and a scenario-by-broker table
with its joins, shuffles and range partitioning cost seconds of Spark jobs on any cluster size
(bench/results/profile_simulate.jsonl).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kreassign.simulate.client_impact import ClientModel
from kreassign.simulate.scenarios import Scenario
from kreassign.simulate.schemas import BROKER_BASE, MODEL_MOVES, PACKED_INPUTS, columns

if TYPE_CHECKING:
    from kreassign.simulate.scenario_run import ScenarioArrays

MOVE_COLUMNS = tuple(f.name for f in MODEL_MOVES.fields)
BROKER_COLUMNS = tuple(f.name for f in BROKER_BASE.fields)


def _ipc(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _binary(stream: pa.Buffer) -> pa.Array:
    """One binary cell holding `stream` (no copy of it)."""
    offsets = pa.py_buffer(np.array([0, stream.size], dtype=np.int32).tobytes())
    return pa.BinaryArray.from_buffers(pa.binary(), 1, [None, offsets, stream])


def pack_inputs(moves: DataFrame, brokers: DataFrame) -> DataFrame:
    """Every move and every broker's base in one row (MOVES, BROKER_BASE -> PACKED_INPUTS),
    through the driver (see the module's docstring)."""
    from kreassign.simulate.inputs import arrow_schema

    move_cell = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()),
                                         _binary(_ipc(moves.select(*columns(MODEL_MOVES)).toArrow())),
                                         type=pa.list_(pa.binary()))
    broker_cell = _binary(_ipc(brokers.select(*columns(BROKER_BASE)).toArrow()))
    packed = pa.Table.from_arrays([move_cell, broker_cell], schema=arrow_schema(PACKED_INPUTS))
    return moves.sparkSession.createDataFrame(packed, schema=PACKED_INPUTS)


def unpack_brokers(chunk: pa.Buffer | bytes) -> dict[str, np.ndarray]:
    """The brokers of PACKED_INPUTS as numpy columns sorted by broker id."""
    from kreassign.simulate.inputs import arrow_schema

    table = pa.ipc.open_stream(chunk).read_all().cast(arrow_schema(BROKER_BASE))
    cols = {name: table.column(name).to_numpy() for name in BROKER_COLUMNS}
    order = np.argsort(cols["broker"], kind="stable")
    return {name: values[order] for name, values in cols.items()}


def scenario_brokers(base: Mapping[str, np.ndarray], scenario: Scenario) -> dict[str, np.ndarray]:
    """One scenario's view of every broker: consumers read what is written, so the write
    multiplier scales every client and replication rate (and the leader throttle's in-sync
    base); both throttles take the scenario's rate (`--throttle` sets them), inf without one."""
    scaled = {name: base[name] * scenario.write_multiplier
              for name in ("client_in_bps", "client_out_bps", "replication_in_bps", "replication_out_bps",
                           "leader_base_bps")}
    rate = np.full(len(base["broker"]), np.inf if scenario.throttle_bps is None else float(scenario.throttle_bps))
    return {**base, **scaled, "leader_rate_bps": rate, "follower_rate_bps": rate}


def unpack_moves(chunks: Sequence[pa.Buffer | bytes]) -> dict[str, np.ndarray]:
    """The moves of PACKED_MOVES as numpy columns in plan order (move id), whatever order the
    chunks arrived in."""
    from kreassign.simulate.inputs import arrow_schema

    schema = arrow_schema(MODEL_MOVES)
    tables = [pa.ipc.open_stream(chunk).read_all().cast(schema) for chunk in chunks]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    cols = {name: table.column(name).to_numpy() for name in MOVE_COLUMNS}
    order = np.argsort(cols["move_id"], kind="stable")
    return {name: values[order] for name, values in cols.items()}


class ScenarioTask:
    """The function each task runs: Arrow batches of (scenario index, all inputs) rows in, one
    SCENARIO_RESULT row out per scenario."""

    def __init__(self, scenarios: Sequence[Scenario], clients: ClientModel, points: int) -> None:
        self.scenarios = tuple(scenarios)
        self.clients = clients
        self.points = points

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kreassign.simulate.inputs import arrow_schema
        from kreassign.simulate.schemas import SCENARIO_RESULT

        schema = arrow_schema(SCENARIO_RESULT)
        moves: dict[str, np.ndarray] | None = None
        base: dict[str, np.ndarray] = {}
        for batch in batches:
            for i in range(batch.num_rows):
                row = batch.slice(i, 1)
                if moves is None:  # every row carries the same broadcast inputs: unpack them once
                    cell = row.column("move_chunks")[0]
                    moves = unpack_moves([chunk.as_buffer() for chunk in cell.values])
                    base = unpack_brokers(row.column("broker_chunk")[0].as_buffer())
                scenario = self.scenarios[int(row.column("scenario_index")[0].as_py())]
                yield self.run(scenario, scenario_brokers(base, scenario), moves, schema)

    def run(self, scenario: Scenario, brokers: Mapping[str, np.ndarray], moves: Mapping[str, np.ndarray],
            schema: pa.Schema) -> pa.RecordBatch:
        """One scenario through the model, as a one-row record batch of `schema`."""
        from kreassign.simulate.scenario_run import run_scenario, scenario_row

        arrays = scenario_arrays(brokers, moves)
        run = run_scenario(arrays, scenario, self.points)
        row = scenario_row(scenario.scenario_id, arrays, run, self.clients)
        return pa.RecordBatch.from_arrays([_cell(row[f.name], f.type) for f in schema], schema=schema)


def scenario_arrays(brokers: Mapping[str, np.ndarray], moves: Mapping[str, np.ndarray]) -> ScenarioArrays:
    """The model's arrays from a scenario's broker columns (sorted by id) and the moves."""
    from kreassign.simulate.scenario_run import ScenarioArrays

    def col(values: np.ndarray, dtype: type) -> np.ndarray:
        return np.asarray(values, dtype=dtype)

    return ScenarioArrays(
        broker_ids=col(brokers["broker"], np.int64),
        network_in=col(brokers["network_in_bps"], np.float64),
        network_out=col(brokers["network_out_bps"], np.float64),
        client_in=col(brokers["client_in_bps"], np.float64),
        client_out=col(brokers["client_out_bps"], np.float64),
        replication_in=col(brokers["replication_in_bps"], np.float64),
        replication_out=col(brokers["replication_out_bps"], np.float64),
        leader_base=col(brokers["leader_base_bps"], np.float64),
        leader_rate=col(brokers["leader_rate_bps"], np.float64),
        follower_rate=col(brokers["follower_rate_bps"], np.float64),
        move_id=col(moves["move_id"], np.int64),
        source=col(moves["source"], np.int64),
        dest=col(moves["dest"], np.int64),
        bytes=col(moves["bytes"], np.int64),
        write_bps=col(moves["write_bps"], np.float64),
        failover_source=col(moves["failover_source"], np.int64),
        released_bps=col(moves["released_bps"], np.float64),
        session=col(moves["session"], np.int8),
        warm=col(moves["warm"], np.bool_),
    )


def _cell(value: object, kind: pa.DataType) -> pa.Array:
    """A one-element Arrow array: a scalar, or a numpy array as one list (no per-element Python)."""
    if pa.types.is_list(kind):
        values = pa.array(np.asarray(value), type=kind.value_type)
        return pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values, type=kind)
    return pa.array([value], type=kind)


def simulate_scenarios(packed: DataFrame, scenarios: Sequence[Scenario], clients: ClientModel,
                       points: int) -> DataFrame:
    """One model run per scenario (PACKED_INPUTS -> SCENARIO_RESULT).

    `spark.range` puts each scenario in its own partition, so the scheduler hands them to
    free cores one at a time; the inputs row is broadcast to every task, never shuffled.
    """
    from kreassign.simulate.schemas import SCENARIO_RESULT

    task = ScenarioTask(scenarios, clients, points)
    spread = packed.sparkSession.range(0, len(scenarios), 1, max(1, len(scenarios))).select(
        F.col("id").cast("int").alias("scenario_index"))
    return spread.crossJoin(F.broadcast(packed)).mapInArrow(task, schema=SCENARIO_RESULT)
