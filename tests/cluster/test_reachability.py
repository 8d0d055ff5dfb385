"""The exchange-root reachability rule and the deploy-mode rule (no Spark, no Airflow)."""

from __future__ import annotations

import pytest

from airflow_flinkchain.cluster import (
    STANDALONE_PYTHON_CLUSTER_MODE_ERROR,
    DeployModeNotSupported,
    ExchangeRootNotShared,
    check_deploy_mode,
    check_exchange_root_reachable,
    is_driver_local_root,
    is_local_master,
)

LOCAL_MASTERS = [None, "", "local", "local[2]", "local[*]", "local[4,2]", "LOCAL[*]", "local-cluster[2,1,1024]"]
REMOTE_MASTERS = ["spark://spark-master:7077", "spark://h1:7077,h2:7077", "yarn", "yarn-cluster",
                  "k8s://https://10.0.0.1:6443", "mesos://zk://host:2181/mesos"]
DRIVER_LOCAL_ROOTS = ["/tmp/exchange", "relative/exchange", "file:///shared/exchange", "file:/shared/x",
                      "FILE:///x", "C:\\exchange"]
SHARED_FS_ROOTS = ["hdfs://nn:8020/flinkchain", "s3://bucket/exchange", "s3a://bucket/exchange", "gs://b/x", "abfss://c@acct.dfs.core.windows.net/x",
                   "viewfs://cluster/x", "hdfs:///x"]


@pytest.mark.parametrize("master", LOCAL_MASTERS)
def test_local_masters(master):
    assert is_local_master(master)


@pytest.mark.parametrize("master", REMOTE_MASTERS)
def test_remote_masters(master):
    assert not is_local_master(master)


@pytest.mark.parametrize("root", DRIVER_LOCAL_ROOTS)
def test_driver_local_roots(root):
    assert is_driver_local_root(root)


@pytest.mark.parametrize("root", SHARED_FS_ROOTS)
def test_shared_fs_roots(root):
    assert not is_driver_local_root(root)


@pytest.mark.parametrize("master", LOCAL_MASTERS)
@pytest.mark.parametrize("root", DRIVER_LOCAL_ROOTS + SHARED_FS_ROOTS)
def test_local_master_accepts_any_root(master, root):
    check_exchange_root_reachable(master, root)


@pytest.mark.parametrize("master", REMOTE_MASTERS)
@pytest.mark.parametrize("root", SHARED_FS_ROOTS)
def test_remote_master_accepts_shared_file_systems(master, root):
    check_exchange_root_reachable(master, root)


@pytest.mark.parametrize("master", REMOTE_MASTERS)
@pytest.mark.parametrize("root", DRIVER_LOCAL_ROOTS)
def test_remote_master_refuses_driver_local_root(master, root):
    with pytest.raises(ExchangeRootNotShared) as err:
        check_exchange_root_reachable(master, root)
    msg = str(err.value)
    assert repr(root) in msg and repr(master) in msg
    assert "exchange_root_shared=True" in msg and "[flinkchain]" in msg and "hdfs://" in msg


@pytest.mark.parametrize("master", REMOTE_MASTERS)
@pytest.mark.parametrize("root", DRIVER_LOCAL_ROOTS)
def test_remote_master_accepts_driver_local_root_declared_shared(master, root):
    check_exchange_root_reachable(master, root, shared=True)


def test_missing_exchange_root_is_an_error():
    with pytest.raises(ExchangeRootNotShared, match="exchange_root"):
        check_exchange_root_reachable("local[2]", "")


def test_error_is_a_value_error():
    assert issubclass(ExchangeRootNotShared, ValueError)


@pytest.mark.parametrize("master", LOCAL_MASTERS + REMOTE_MASTERS)
def test_client_mode_always_fine(master):
    assert check_deploy_mode(master, "client") == "client"
    assert check_deploy_mode(master, None) == "client"


@pytest.mark.parametrize("master", ["yarn", "k8s://https://10.0.0.1:6443"])
def test_cluster_mode_on_yarn_and_k8s(master):
    assert check_deploy_mode(master, "cluster") == "cluster"


def test_cluster_mode_on_standalone_is_refused_with_what_to_do():
    with pytest.raises(DeployModeNotSupported) as err:
        check_deploy_mode("spark://spark-master:7077", "cluster")
    msg = str(err.value)
    assert STANDALONE_PYTHON_CLUSTER_MODE_ERROR in msg and "deploy_mode='client'" in msg


def test_cluster_mode_on_local_is_refused():
    with pytest.raises(DeployModeNotSupported):
        check_deploy_mode("local[2]", "cluster")


def test_unknown_deploy_mode():
    with pytest.raises(DeployModeNotSupported):
        check_deploy_mode("yarn", "both")
