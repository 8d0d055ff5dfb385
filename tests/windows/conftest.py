from tests.state.both_backends import (  # noqa: F401 - the hooks run this directory's tests on both backends
    pytest_collection_modifyitems,
    pytest_generate_tests,
    state_backend_kind,
)
