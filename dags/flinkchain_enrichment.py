"""Example: orders enriched with a keyed customer stream and broadcast pricing rules.

    orders    (JSON lines) -> order_time    --key_by customer--+
                                                               +-> enrich_customer --+
    customers (JSON lines) -> customer_time --key_by customer--+                     +-> apply_rules -> enriched (JSON)
                                                                                     |              `-> review (JSON)
    rules     (JSON lines) ------------------------- broadcast ----------------------+

`enrich_customer` is a KeyedCoProcessFunction: per customer it keeps the tier versions
(input 2) and the orders waiting for them (input 1) in keyed list state, and an event-time
timer `SETTLE_MS` after each order emits it with the tier valid at the order's time.
`apply_rules` is a BroadcastProcessFunction: every rule lands in the broadcast map state
of every parallel instance; each order reads its tier's discount and the review threshold.
Both two-input operators head their own chain (Flink's rule), so the job has five chains.
BATCH runtime mode: each customer's records of both inputs are processed together and the
rules are read before any order, so the output does not depend on arrival order.
"""

from __future__ import annotations

from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import Duration, StreamPipeline, WatermarkStrategy
from airflow_flinkchain.functions import BroadcastProcessFunction, KeyedCoProcessFunction
from airflow_flinkchain.io.sinks import JsonLinesSink
from airflow_flinkchain.io.sources import JsonLinesSource
from airflow_flinkchain.state import ListStateDescriptor, MapStateDescriptor

RULES = MapStateDescriptor("rules")
SETTLE_MS = 5_000  # how long an order waits for a customer version that arrives out of order


def order_time(order, _previous) -> int:
    return order["ts"]


def version_time(version, _previous) -> int:
    return version["valid_from"]


def customer_of(record) -> str:
    return record["customer"]


class EnrichWithCustomer(KeyedCoProcessFunction):
    """Orders (input 1) with the customer's tier valid at the order's time (input 2: versions)."""

    def open(self, runtime_context):
        self.versions = runtime_context.get_list_state(ListStateDescriptor("versions"))
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending"))

    def process_element1(self, order, ctx):
        self.pending.add(order)
        ctx.timer_service().register_event_time_timer(order["ts"] + SETTLE_MS)

    def process_element2(self, version, ctx):
        self.versions.add((version["valid_from"], version["tier"]))

    def on_timer(self, timestamp, ctx):
        versions = sorted(self.versions.get() or [])
        waiting = []
        for order in sorted(self.pending.get() or [], key=lambda o: o["ts"]):
            if order["ts"] + SETTLE_MS > timestamp:
                waiting.append(order)
                continue
            tier = tier_at(versions, order["ts"])
            yield {"order_id": order["order_id"], "customer": ctx.get_current_key(), "amount": order["amount"],
                   "ts": order["ts"], "tier": tier}
        self.pending.update(waiting)


def tier_at(versions: list, ts: int) -> str:
    """The tier of the latest version (valid_from, tier) at `ts`, "unknown" before the first."""
    tier = "unknown"
    for valid_from, t in versions:
        if valid_from <= ts:
            tier = t
    return tier


class ApplyRules(BroadcastProcessFunction):
    """Rules ({"name", "value"}) into the broadcast state; orders get their tier's discount and a
    review flag above `review_above`."""

    def process_broadcast_element(self, rule, ctx):
        ctx.get_broadcast_state(RULES).put(rule["name"], rule["value"])

    def process_element(self, order, ctx):
        yield priced(order, dict(ctx.get_broadcast_state(RULES).items()))


def priced(order: dict, rules: dict) -> dict:
    discount = rules.get(f"discount:{order['tier']}", 0.0)
    threshold = rules.get("review_above")
    return {**order, "discount": discount, "net": round(order["amount"] * (1 - discount), 2),
            "review": threshold is not None and order["amount"] > threshold}


def needs_review(order) -> bool:
    return order["review"]


def enrichment_pipeline(sample_dir: str, output_dir: str, parallelism: int = 2) -> StreamPipeline:
    out = f"{output_dir}/enrichment/{{{{ run_key }}}}"
    data = f"{sample_dir}/enrichment"
    p = StreamPipeline("enrichment", parallelism=parallelism, conn_id="spark_default", runtime_mode="batch")
    p.on_setup(sample_data.ensure_sample_data)
    lateness = Duration.of_seconds(3)
    orders = (p.from_source(JsonLinesSource(f"{data}/orders"), name="orders").uid("orders")
              .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(lateness)
                                                .with_timestamp_assigner(order_time))
              .name("order_time").uid("order_time"))
    customers = (p.from_source(JsonLinesSource(f"{data}/customers"), name="customers").uid("customers")
                 .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(lateness)
                                                   .with_timestamp_assigner(version_time))
                 .name("customer_time").uid("customer_time"))
    rules = p.from_source(JsonLinesSource(f"{data}/rules"), name="rules").uid("rules").set_parallelism(1)
    enriched = (orders.connect(customers).key_by(customer_of, customer_of).process(EnrichWithCustomer())
                .name("enrich_customer").uid("enrich_customer"))
    priced_orders = enriched.connect(rules.broadcast(RULES)).process(ApplyRules()).name("apply_rules").uid("apply_rules")
    priced_orders.sink_to(JsonLinesSink(f"{out}/enriched"), name="enriched").uid("enriched")
    (priced_orders.filter(needs_review).name("needs_review").uid("needs_review")
        .sink_to(JsonLinesSink(f"{out}/review"), name="review").uid("review"))
    return p


with DAG("flinkchain_enrichment", schedule=None, doc_md=__doc__, **sample_data.example_dag_args()) as dag:
    enrichment_pipeline(sample_data.sample_dir(), sample_data.output_dir()).to_airflow()
