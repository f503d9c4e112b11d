"""One model run per scenario on the executors, without shuffling the moves.

The moves are the same in every scenario, so they are packed once into a single row (one Arrow
IPC stream) and broadcast; the per-broker side, which a scenario changes, is packed as one row
per scenario. The scenario rows are spread one per partition and joined with the broadcast row,
and `mapInArrow` runs the replication model on each (Arrow in, Arrow out, no pandas and no
per-row Python objects).

The moves reach that row through the driver: `toArrow` (the JVM's Arrow batches, no Python
worker) and back as a one-row DataFrame. A broadcast collects its rows on the driver anyway, and
packing in Python workers (a worker per partition, Arrow to Python and back, then one more job
to gather the chunks) cost 3.5-6 CPU s for 1M moves against 0.9 for this
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
from kreassign.simulate.schemas import MODEL_BROKERS, MODEL_MOVES, PACKED_BROKERS, PACKED_MOVES, columns

if TYPE_CHECKING:
    from kreassign.simulate.scenario_run import ScenarioArrays

MOVE_COLUMNS = tuple(f.name for f in MODEL_MOVES.fields)
BROKER_COLUMNS = tuple(f.name for f in MODEL_BROKERS.fields if f.name != "scenario_id")


def pack_moves(moves: DataFrame) -> DataFrame:
    """Every move in one row (MOVES -> PACKED_MOVES): the moves as one Arrow IPC stream, through
    the driver (see the module's docstring)."""
    from kreassign.simulate.inputs import arrow_schema

    table = moves.select(*columns(MODEL_MOVES)).toArrow()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    stream = sink.getvalue()
    offsets = pa.py_buffer(np.array([0, stream.size], dtype=np.int32).tobytes())
    chunk = pa.BinaryArray.from_buffers(pa.binary(), 1, [None, offsets, stream])  # no copy of the stream
    cell = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), chunk, type=pa.list_(pa.binary()))
    packed = pa.Table.from_arrays([cell], schema=arrow_schema(PACKED_MOVES))
    return moves.sparkSession.createDataFrame(packed, schema=PACKED_MOVES)


def pack_brokers(per_broker: DataFrame) -> DataFrame:
    """One row per scenario, its brokers as parallel arrays sorted by id (MODEL_BROKERS ->
    PACKED_BROKERS). The struct's first field is the broker id, which `sort_array` sorts by."""
    packed = per_broker.groupBy("scenario_id").agg(
        F.sort_array(F.collect_list(F.struct(*BROKER_COLUMNS))).alias("b"))
    return packed.select("scenario_id", *[F.col("b").getField(name).alias(name) for name in BROKER_COLUMNS]
                         ).select(*columns(PACKED_BROKERS))


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
    """The function each task runs: Arrow batches of (scenario's brokers, all moves) rows in,
    one SCENARIO_RESULT row out per scenario."""

    def __init__(self, scenarios: Mapping[int, Scenario], clients: ClientModel, points: int) -> None:
        self.scenarios = dict(scenarios)
        self.clients = clients
        self.points = points

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kreassign.simulate.inputs import arrow_schema
        from kreassign.simulate.schemas import SCENARIO_RESULT

        schema = arrow_schema(SCENARIO_RESULT)
        moves: dict[str, np.ndarray] | None = None
        for batch in batches:
            for i in range(batch.num_rows):
                row = batch.slice(i, 1)
                if moves is None:  # every row carries the same broadcast moves: unpack them once
                    cell = row.column("move_chunks")[0]
                    moves = unpack_moves([chunk.as_buffer() for chunk in cell.values])
                brokers = {name: row.column(name)[0].values.to_numpy(zero_copy_only=False)
                           for name in BROKER_COLUMNS}
                yield self.run(int(row.column("scenario_id")[0].as_py()), brokers, moves, schema)

    def run(self, scenario_id: int, brokers: Mapping[str, np.ndarray], moves: Mapping[str, np.ndarray],
            schema: pa.Schema) -> pa.RecordBatch:
        """One scenario through the model, as a one-row record batch of `schema`."""
        from kreassign.simulate.scenario_run import run_scenario, scenario_row

        arrays = scenario_arrays(brokers, moves)
        run = run_scenario(arrays, self.scenarios[scenario_id], self.points)
        row = scenario_row(scenario_id, arrays, run, self.clients)
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


def simulate_scenarios(moves: DataFrame, brokers: DataFrame, scenarios: Sequence[Scenario],
                       clients: ClientModel, points: int) -> DataFrame:
    """One model run per scenario (PACKED_MOVES, PACKED_BROKERS -> SCENARIO_RESULT).

    The scenario rows are range-partitioned one per partition, so the scheduler hands them to
    free cores one at a time; the moves row is broadcast to every task, never shuffled.
    """
    from kreassign.simulate.schemas import SCENARIO_RESULT

    task = ScenarioTask({s.scenario_id: s for s in scenarios}, clients, points)
    spread = brokers.repartitionByRange(max(1, len(scenarios)), "scenario_id")
    return spread.crossJoin(F.broadcast(moves)).mapInArrow(task, schema=SCENARIO_RESULT)
