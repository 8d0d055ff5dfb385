-- The run store gets its own database beside Airflow's metadata DB (AIRFLOW__FLINKCHAIN__STORE_URL).
CREATE DATABASE flinkchain OWNER airflow;
