from airflow_flinkchain import StreamPipeline

pipeline = StreamPipeline("bad", parallelism=2)
pipeline.from_collection([1, 2]).name("rows").forward().map(str).name("fmt").collect("out")
