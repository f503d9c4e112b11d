pytest_plugins = ["conftest_sandbox", "conftest_spark"]
