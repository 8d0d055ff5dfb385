from airflow_flinkchain import StreamPipeline

first = StreamPipeline("first")
first.from_collection([1]).name("rows").map(str).name("fmt").collect("out")

second = StreamPipeline("second", parallelism=3)
second.from_collection([1]).name("rows").rebalance().map(str).name('say "hi"').collect("out")
select_warning = second.from_collection([2]).name("more").split(lambda x: ["a"], names=["a"])
select_warning.select("b").collect("never")
