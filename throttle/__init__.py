"""The KIP-73 throttle setting: per-broker rates and their precedence (`Rates`), the throttled-replica
lists, the translation to and from Kafka's configs, and the report of what would be set."""

if not __name__.startswith("kreassign."):  # the folder was put on sys.path: a second, divergent copy
    raise ImportError(f"import kreassign.{__name__}, not {__name__}: the top-level folders are "
                      "sub-packages of kreassign (pip install -e . or make test sets this up)")
