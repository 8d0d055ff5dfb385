from airflow_flinkchain import StreamPipeline

p = StreamPipeline("x")
p.from_collection([1]).map(str).select("a")  # select() without split()
