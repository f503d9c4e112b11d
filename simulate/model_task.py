"""One model run per scenario on the executors, without shuffling the moves.

The moves and the per-broker base (BROKER_BASE) are the same in every scenario, so both are
gathered once on the driver (`toArrow`, the JVM's Arrow batches, each table kept as one Arrow
IPC stream) and shipped to every task (`ship_inputs`); `spark.range` gives every scenario its
own partition and `mapInArrow` runs the replication model on each (Arrow in, Arrow out, no
pandas and no per-row Python objects). A task scales the brokers' traffic by its scenario's
write load and sets its throttle (`scenario_brokers`).

How the streams reach the tasks depends on the session:
- classic (local or a cluster): a Python broadcast variable, which a worker on the driver's
  machine reads from the driver's file and other executors fetch once each. A task that only
  reads the 1M-move inputs took 1.24 s instead of 1.85 s with the one-row DataFrame below: no
  Arrow-to-row conversion on the way in, no broadcast join, no row-to-Arrow conversion on the
  way out (DEVELOPERS.md, "simulate end to end: the budget met");
- Spark Connect, which has no broadcast variables: one PACKED_INPUTS row that every
  scenario's partition joins (a broadcast join).

Packing the moves in Python workers instead (a worker per partition, Arrow to Python and back,
one more job to gather the chunks) cost 3.5-6 CPU s for 1M moves against 0.9 for the driver's
`toArrow`, and a scenario-by-broker table with its joins, shuffles and range partitioning cost
seconds of Spark jobs on any cluster size (bench/results/profile_simulate.jsonl).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kreassign.simulate.client_impact import ClientModel
from kreassign.simulate.scenarios import Scenario
from kreassign.simulate.schemas import BROKER_BASE, MODEL_MOVES, PACKED_INPUTS, columns

if TYPE_CHECKING:
    from pyspark import Broadcast

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


@dataclass(frozen=True)
class InputStreams:
    """Every move and every broker's base, each table one Arrow IPC stream."""

    moves: pa.Buffer
    """MODEL_MOVES"""
    brokers: pa.Buffer
    """BROKER_BASE"""


def gather_inputs(moves: DataFrame, brokers: Callable[[], DataFrame]) -> InputStreams:
    """Both tables on the driver (MOVES, BROKER_BASE -> InputStreams). The two collects run at
    once, and the broker base is defined in its own thread: each job's planning and Arrow
    transfer leave cores its partner's tasks can use."""
    with ThreadPoolExecutor(2, thread_name_prefix="gather") as pool:
        move_table = pool.submit(lambda: moves.select(*columns(MODEL_MOVES)).toArrow())
        broker_table = pool.submit(lambda: brokers().select(*columns(BROKER_BASE)).toArrow())
        return InputStreams(moves=_ipc(move_table.result()), brokers=_ipc(broker_table.result()))


def packed_frame(spark: SparkSession, streams: InputStreams) -> DataFrame:
    """Both streams as one PACKED_INPUTS row (what a Spark Connect session ships)."""
    from kreassign.simulate.inputs import arrow_schema

    move_cell = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), _binary(streams.moves),
                                         type=pa.list_(pa.binary()))
    packed = pa.Table.from_arrays([move_cell, _binary(streams.brokers)], schema=arrow_schema(PACKED_INPUTS))
    return spark.createDataFrame(packed, schema=PACKED_INPUTS)


@dataclass(frozen=True)
class ShippedInputs:
    """The inputs where the model tasks read them: a broadcast variable holding both streams
    (classic sessions) or a PACKED_INPUTS row to join (Spark Connect)."""

    spark: SparkSession
    broadcast: Broadcast[tuple[bytes, bytes]] | None = None
    frame: DataFrame | None = None


def _classic(spark: SparkSession) -> bool:
    return not type(spark).__module__.startswith("pyspark.sql.connect")


@contextmanager
def ship_inputs(spark: SparkSession, streams: InputStreams) -> Iterator[ShippedInputs]:
    """Ship the gathered inputs to the model tasks, for as long as the results computed from
    them may be read (a broadcast variable is destroyed on exit)."""
    if not _classic(spark):
        yield ShippedInputs(spark, frame=packed_frame(spark, streams))
        return
    shipped = spark.sparkContext.broadcast((streams.moves.to_pybytes(), streams.brokers.to_pybytes()))
    try:
        yield ShippedInputs(spark, broadcast=shipped)
    finally:
        shipped.destroy()


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
    ids = cols["move_id"]
    if np.all(ids[1:] >= ids[:-1]):  # gathered in plan order (the usual case): no sort, no copies
        return cols
    order = np.argsort(ids, kind="stable")
    return {name: values[order] for name, values in cols.items()}


class ScenarioTask:
    """The function each task runs: Arrow batches of scenario-index rows in (each with the
    PACKED_INPUTS columns when the inputs come by join), one SCENARIO_RESULT row out per
    scenario."""

    def __init__(self, scenarios: Sequence[Scenario], clients: ClientModel, points: int,
                 shipped: Broadcast[tuple[bytes, bytes]] | None = None) -> None:
        self.scenarios = tuple(scenarios)
        self.clients = clients
        self.points = points
        self.shipped = shipped

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kreassign.simulate.inputs import arrow_schema
        from kreassign.simulate.schemas import SCENARIO_RESULT

        schema = arrow_schema(SCENARIO_RESULT)
        moves: dict[str, np.ndarray] | None = None
        base: dict[str, np.ndarray] = {}
        for batch in batches:
            for i in range(batch.num_rows):
                row = batch.slice(i, 1)
                if moves is None:  # the same inputs for every scenario: unpack them once
                    moves, base = self._inputs(row)
                scenario = self.scenarios[int(row.column("scenario_index")[0].as_py())]
                yield self.run(scenario, scenario_brokers(base, scenario), moves, schema)

    def _inputs(self, row: pa.RecordBatch) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The moves and the broker base, from the broadcast variable or the joined row."""
        if self.shipped is not None:
            move_stream, broker_stream = self.shipped.value
            return unpack_moves([move_stream]), unpack_brokers(broker_stream)
        cell = row.column("move_chunks")[0]
        return (unpack_moves([chunk.as_buffer() for chunk in cell.values]),
                unpack_brokers(row.column("broker_chunk")[0].as_buffer()))

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


def _import_model(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A warm-up task (`warm_workers`): the model's imports, nothing out."""
    import kreassign.simulate.scenario_run  # noqa: F401 - the import is the work

    for _ in batches:
        pass
    return iter(())


def warm_workers(spark: SparkSession, tasks: int) -> threading.Thread:
    """Start `tasks` Python workers, with the model's modules imported, while the driver and the
    JVM prepare the inputs; join the returned thread before the session stops.

    Spark starts a Python worker when the first Python task needs one and keeps it for the next
    (`spark.python.worker.reuse`), so the model task finds a worker that has imported numpy,
    pyarrow and the model instead of spending about a second of the critical path on them
    (py-spy on the 1M-move command: the warmed worker runs the model task). For a local master
    only: elsewhere the model task may land on another executor.
    """
    def run() -> None:
        try:
            spark.range(0, tasks, 1, tasks).mapInArrow(_import_model, schema="id long").collect()
        except Exception:  # noqa: BLE001 - the model task starts its own worker then
            pass

    thread = threading.Thread(target=run, name="warm-python-workers", daemon=True)
    thread.start()
    return thread


def simulate_scenarios(inputs: ShippedInputs, scenarios: Sequence[Scenario], clients: ClientModel,
                       points: int) -> DataFrame:
    """One model run per scenario (the shipped inputs -> SCENARIO_RESULT).

    `spark.range` puts each scenario in its own partition, so the scheduler hands them to
    free cores one at a time; the inputs reach every task by broadcast, never shuffled.
    """
    from kreassign.simulate.schemas import SCENARIO_RESULT

    spread = inputs.spark.range(0, len(scenarios), 1, max(1, len(scenarios))).select(
        F.col("id").cast("int").alias("scenario_index"))
    if inputs.broadcast is not None:
        return spread.mapInArrow(ScenarioTask(scenarios, clients, points, inputs.broadcast), schema=SCENARIO_RESULT)
    assert inputs.frame is not None
    return spread.crossJoin(F.broadcast(inputs.frame)).mapInArrow(ScenarioTask(scenarios, clients, points),
                                                                  schema=SCENARIO_RESULT)
