"""The issue's orders example as a DAG file (used by the CLI tests and docs/writing-pipelines.md)."""

from airflow.sdk import DAG

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import ProcessFunction

late = OutputTag("late")
rows = [
    {"id": 1, "customer": "a", "amount": 120, "delay": 5},
    {"id": 2, "customer": "b", "amount": 30, "delay": 90},
    {"id": 3, "customer": "a", "amount": 70, "delay": 0},
]


class FlagLate(ProcessFunction):
    output_tags = [late]

    def process_element(self, value, ctx):
        if value["delay"] > 60:
            ctx.output(late, value)  # side output; `yield late, value` works too
        else:
            yield value


def parse(row):
    return dict(row)


def valid(order):
    return order["amount"] > 0


def to_alert(order):
    return f"order {order['id']} is late"


def add(a, b):
    return {**a, "amount": a["amount"] + b["amount"]}


def audit(order):
    return {"id": order["id"], "amount": order["amount"]}


def build_pipeline():
    p = StreamPipeline("orders", parallelism=2)
    orders = p.from_collection(rows).name("orders")
    ok = orders.map(parse).name("parse").filter(valid).name("valid").process(FlagLate()).name("flag_late")
    ok.get_side_output(late).map(to_alert).name("alert").collect("alerts")
    ok.key_by(lambda o: o["customer"]).reduce(add).name("sum").collect("totals")
    audited = ok.map(audit).name("audit")             # split() and side outputs: not on one operator
    sizes = audited.split(lambda o: ["big"] if o["amount"] > 100 else ["small"], names=["big", "small"])
    sizes.select("big").collect("big_orders")
    return p


with DAG("orders", schedule=None):
    build_pipeline()  # no global name: `flinkchain plan` still finds it
