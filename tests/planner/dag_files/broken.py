import no_such_module_flinkchain  # noqa: F401
