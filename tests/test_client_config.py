"""Kafka client properties -> kafka-python KafkaAdminClient settings."""
from __future__ import annotations

import os
import re
import ssl
import stat
from pathlib import Path

import pytest

from kreassign.cluster.client_config import (
    DEFAULT_CLIENT_ID,
    AdminTimeouts,
    build_client_config,
    load_client_config,
    normalise_pem,
    parse_jaas_config,
)
from kreassign.cluster.java_properties import parse_properties, read_properties
from kreassign.cluster.errors import InputError

CERT = """-----BEGIN CERTIFICATE-----
MIIBiDCCAS+gAwIBAgIUMRUBnVm+O3D+UxCAn89gcdXN9scwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOa3JlYXNzaWduLXRlc3QwIBcNMjYxMTIyMDE0MzI4WhgPMjEy
NjEwMjkwMTQzMjhaMBkxFzAVBgNVBAMMDmtyZWFzc2lnbi10ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAE0s7ahoQyO6QeynGfyWakouIWf/RS7hGe5DilJ4WF
9CbyLTXhxKqMt04tC9obC+m8WB8B64h8uuhqnU1dM0Gc+aNTMFEwHQYDVR0OBBYE
FDftXQF8Re22+qqeVo4kFdqmEtK8MB8GA1UdIwQYMBaAFDftXQF8Re22+qqeVo4k
FdqmEtK8MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgMRg/qTxB
wjufMGn4AKOIubaBv1HBI5cacGWBPWvtpWMCIHl9krbheItozjyGyW7X52TrId94
0CEifp/QDGzOMzB/
-----END CERTIFICATE-----
"""
KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLxVwE29mOPmuSkIJ
KuWh+ELljJMRAvQSRv5Py2QHHLKhRANCAATSztqGhDI7pB7KcZ/JZqSi4hZ/9FLu
EZ7kOKUnhYX0JvItNeHEqoy3Ti0L2hsL6bxYHwHriHy66GqdTV0zQZz5
-----END PRIVATE KEY-----
"""
ENCRYPTED_KEY = """-----BEGIN ENCRYPTED PRIVATE KEY-----
MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj6DrsHTA6yYgICCAAw
DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEENP4uqIEHsWzeqFQ2flvqIkEgZDW
nTIx9vHFnFrElnzYvgfMcgMNeo1xvQrxXkJ3z8jAVowQZDOSI3N/uQsBLLRW+YtH
hwwW9M67STkD8uNxd66o5Qrqe4JBt3OTugCnQwrnA5RQjFuj6cuoVucag9pXdnNR
0Lxf/lA9McvwtJFvAme3L6stE+YbWIoHSMhmjfDWTDz2U2bcOvZoTsYUW9Zmd+c=
-----END ENCRYPTED PRIVATE KEY-----
"""
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="s3cr=t;";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="bob" password="pw";')


def folded(pem: str) -> str:
    """A PEM block as it arrives from a properties value with `\\` continuations: one line."""
    return " ".join(pem.split("\n"))


def build(props: dict[str, str], **kw: object) -> object:
    return build_client_config(props, bootstrap_server="127.0.0.1:9092", **kw)  # type: ignore[arg-type]


# ---- properties syntax ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("a=1\nb = 2\nc:3\nd 4\n", {"a": "1", "b": "2", "c": "3", "d": "4"}),
    ("# comment\n! also a comment\n   \n  key=value", {"key": "value"}),
    ("key=one \\\n    two \\\n  three", {"key": "one two three"}),
    ("key=ends with backslash \\\\\nnext=1", {"key": "ends with backslash \\", "next": "1"}),
    ("key=a\\\n# not a comment\n", {"key": "a# not a comment"}),
    ("path=C:\\\\kafka\\\\ca.pem", {"path": "C:\\kafka\\ca.pem"}),
    ("k\\=x=y", {"k=x": "y"}),
    ("k\\ x = y", {"k x": "y"}),
    ("tab=\\t|\\u0041|\\n", {"tab": "\t|A|\n"}),
    ("empty=\nalone", {"empty": "", "alone": ""}),
    ("dup=1\ndup=2", {"dup": "2"}),
    ("crlf=1\r\nother=2\rthird=3", {"crlf": "1", "other": "2", "third": "3"}),
    ("url=http://x:1/y", {"url": "http://x:1/y"}),
    ("trailing=kept  ", {"trailing": "kept  "}),
])
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_parse_properties_rejects_bad_unicode_escape() -> None:
    with pytest.raises(InputError, match=r"malformed \\uXXXX escape"):
        parse_properties("k=\\u00zz")


def test_read_properties_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_properties(str(tmp_path / "missing.properties"))
    with pytest.raises(InputError, match="is a directory"):
        read_properties(str(tmp_path))


def test_read_properties_latin1_fallback(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_bytes("client.id=caf\xe9\n".encode("latin-1"))
    assert read_properties(str(path)) == {"client.id": "caf\xe9"}


# ---- JAAS ------------------------------------------------------------------------------------

def test_parse_jaas_plain() -> None:
    jaas = parse_jaas_config(PLAIN_JAAS)
    assert jaas.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert jaas.flag == "required"
    assert dict(jaas.options) == {"username": "alice", "password": "s3cr=t;"}
    assert "s3cr" not in repr(jaas)


def test_parse_jaas_unquoted_and_escaped() -> None:
    jaas = parse_jaas_config('m.Module Required username=bob password="a\\"b";')
    assert jaas.flag == "required"
    assert dict(jaas.options) == {"username": "bob", "password": 'a"b'}


@pytest.mark.parametrize("text, message", [
    ("", "must look like"),
    ("OnlyModule", "must look like"),
    ("m.M mandatory username=a;", "'mandatory' is not a login module flag"),
    ('m.M required username="a" password="b"', "must end with ';' after the last option"),
    ("m.M required username;", 'key="value"'),
    ("m.M required username=;", 'key="value"'),
    ('m.M required username="a;', "without its closing quote"),
    ("m.M required a=1; n.N required b=2;", "exactly one login module"),
])
def test_parse_jaas_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_jaas_config(text)


# ---- basic mapping -----------------------------------------------------------------------------

def test_defaults_without_file() -> None:
    config = load_client_config(None, bootstrap_server="127.0.0.1:9092, 127.0.0.1:9093")
    assert config.bootstrap_servers == ("127.0.0.1:9092", "127.0.0.1:9093")
    assert config.timeouts == AdminTimeouts()
    assert config.warnings == ()
    assert config.admin_kwargs() == {
        "bootstrap_servers": ["127.0.0.1:9092", "127.0.0.1:9093"],
        "security_protocol": "PLAINTEXT",
        "client_id": DEFAULT_CLIENT_ID,
        "request_timeout_ms": 30000,
        "bootstrap_timeout_ms": 10000,
        "retry_backoff_ms": 100,
    }


def test_cli_bootstrap_overrides_file() -> None:
    config = build_client_config({"bootstrap.servers": "file:9092"}, bootstrap_server="cli:9092")
    assert config.bootstrap_servers == ("cli:9092",)
    assert build_client_config({"bootstrap.servers": "file:9092"}).bootstrap_servers == ("file:9092",)


def test_missing_bootstrap() -> None:
    with pytest.raises(InputError, match="no bootstrap servers: pass --bootstrap-server"):
        build_client_config({})


def test_client_id_and_pass_through() -> None:
    config = build({"client.id": "ops", "reconnect.backoff.ms": "20",
                    "reconnect.backoff.max.ms": "500", "connections.max.idle.ms": "1000",
                    "metadata.max.age.ms": "5000", "receive.buffer.bytes": "65536",
                    "send.buffer.bytes": "131072", "client.dns.lookup": "use_all_dns_ips"})
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    assert kwargs["client_id"] == "ops"
    assert (kwargs["reconnect_backoff_ms"], kwargs["reconnect_backoff_max_ms"]) == (20, 500)
    assert (kwargs["connections_max_idle_ms"], kwargs["metadata_max_age_ms"]) == (1000, 5000)
    assert (kwargs["receive_buffer_bytes"], kwargs["send_buffer_bytes"]) == (65536, 131072)
    assert kwargs["client_dns_lookup"] == "use_all_dns_ips"
    assert config.warnings == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "TLS"}, "security.protocol=TLS is not one of PLAINTEXT, SSL"),
    ({"request.timeout.ms": "30s"}, "request.timeout.ms=30s is not a whole number"),
    ({"retry.backoff.ms": "-1"}, "retry.backoff.ms=-1 must not be negative"),
    ({"request.timeout.ms": "0"}, "must be positive"),
    ({"client.dns.lookup": "default"}, "client.dns.lookup=default is not one of"),
    ({"default.api.timeout.ms": "1000"}, r"default.api.timeout.ms \(1000\) must be at least "
                                         r"request.timeout.ms \(30000\)"),
])
def test_invalid_values(props: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        build(props)


def test_timeouts_from_properties() -> None:
    config = build({"request.timeout.ms": "5000", "default.api.timeout.ms": "20000",
                    "retry.backoff.ms": "50", "retry.backoff.max.ms": "400"})
    assert config.timeouts == AdminTimeouts(  # type: ignore[attr-defined]
        request_timeout_s=5.0, api_timeout_s=20.0, retry_backoff_s=0.05,
        retry_backoff_max_s=0.4, connect_timeout_s=10.0)
    assert config.admin_kwargs()["request_timeout_ms"] == 5000  # type: ignore[attr-defined]
    assert config.admin_kwargs()["retry_backoff_ms"] == 50  # type: ignore[attr-defined]


def test_large_request_timeout_raises_default_api_timeout() -> None:
    config = build({"request.timeout.ms": "90000"})
    assert config.timeouts.api_timeout_s == 90.0  # type: ignore[attr-defined]


def test_timeout_s_bounds_everything() -> None:
    config = load_client_config(None, bootstrap_server="h:1", timeout_s=2.5)
    assert config.timeouts.api_timeout_s == 2.5
    assert config.timeouts.request_timeout_s == 2.5
    assert config.timeouts.connect_timeout_s == 2.5
    assert config.admin_kwargs()["bootstrap_timeout_ms"] == 2500
    with pytest.raises(InputError, match="must be positive"):
        load_client_config(None, bootstrap_server="h:1", timeout_s=0)


def test_unsupported_keys_are_listed_in_one_warning() -> None:
    config = build({"acks": "all", "linger.ms": "5", "client.id": "x"})
    assert config.warnings == (  # type: ignore[attr-defined]
        "--command-config: kreassign does not use these settings: acks, linger.ms",)


def test_ssl_and_sasl_keys_ignored_on_plaintext_are_reported() -> None:
    config = build({"ssl.truststore.location": "/nowhere.pem", "sasl.mechanism": "PLAIN"},
                   source="/etc/admin.properties")
    assert config.warnings == (  # type: ignore[attr-defined]
        "/etc/admin.properties: ssl.* settings are ignored because security.protocol is "
        "PLAINTEXT: ssl.truststore.location",
        "/etc/admin.properties: sasl.* settings are ignored because security.protocol is "
        "PLAINTEXT: sasl.mechanism",
    )


# ---- SASL --------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "sasl_plaintext"])
def test_sasl_plain(protocol: str) -> None:
    config = build({"security.protocol": protocol, "sasl.mechanism": "PLAIN",
                    "sasl.jaas.config": PLAIN_JAAS})
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"],
            kwargs["sasl_plain_password"]) == ("PLAIN", "alice", "s3cr=t;")
    assert "s3cr" not in repr(config)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram(mechanism: str) -> None:
    config = build({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                    "sasl.jaas.config": SCRAM_JAAS})
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"],
            kwargs["sasl_plain_password"]) == (mechanism, "bob", "pw")


def test_sasl_from_file_with_continuations(tmp_path: Path) -> None:
    path = tmp_path / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" \\\n'
        '    password="admin-secret";\n'
    )
    config = load_client_config(str(path), bootstrap_server="127.0.0.1:9092")
    assert config.client_kwargs["sasl_plain_username"] == "admin"
    assert config.client_kwargs["sasl_plain_password"] == "admin-secret"


@pytest.mark.parametrize("props, message", [
    ({}, "sasl.mechanism is not set \\(Kafka then uses GSSAPI"),
    ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism=GSSAPI is not supported"),
    ({"sasl.mechanism": "OAUTHBEARER"}, "sasl.mechanism=OAUTHBEARER is not supported"),
    ({"sasl.mechanism": "PLAIN"}, "sasl.mechanism=PLAIN needs sasl.jaas.config"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS},
     "uses org.apache.kafka.common.security.scram.ScramLoginModule, but sasl.mechanism=PLAIN "
     "needs org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": PLAIN_JAAS},
     "needs org.apache.kafka.common.security.scram.ScramLoginModule"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";'},
     "sasl.jaas.config has no password"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
     "has no username and no password"),
])
def test_sasl_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        build({"security.protocol": "SASL_SSL", **props})


# ---- SSL ---------------------------------------------------------------------------------------

def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_ssl_pem_files(tmp_path: Path) -> None:
    ca = write(tmp_path, "ca.pem", CERT)
    client = write(tmp_path, "client.pem", CERT + ENCRYPTED_KEY)
    config = build({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": ca, "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": client, "ssl.key.password": "secret",
                    "ssl.truststore.password": "ignored-for-pem"})
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    assert (kwargs["ssl_cafile"], kwargs["ssl_certfile"], kwargs["ssl_password"]) == (ca, client, "secret")
    assert "ssl_keyfile" not in kwargs
    assert config.warnings == ()  # type: ignore[attr-defined]
    context = ssl.create_default_context(cafile=kwargs["ssl_cafile"])
    context.load_cert_chain(kwargs["ssl_certfile"], password=kwargs["ssl_password"])


def test_ssl_pem_detected_without_type(tmp_path: Path) -> None:
    ca = write(tmp_path, "ca.crt", CERT)
    config = build({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                    "sasl.jaas.config": PLAIN_JAAS, "ssl.truststore.location": ca})
    assert config.admin_kwargs()["ssl_cafile"] == ca  # type: ignore[attr-defined]


@pytest.mark.parametrize("value, check", [("", False), ("https", True), ("HTTPS", True)])
def test_endpoint_identification(value: str, check: bool) -> None:
    config = build({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value})
    assert config.admin_kwargs()["ssl_check_hostname"] is check  # type: ignore[attr-defined]


def test_endpoint_identification_default_leaves_kafka_python_default() -> None:
    assert "ssl_check_hostname" not in build({"security.protocol": "SSL"}).admin_kwargs()  # type: ignore[attr-defined]


def test_endpoint_identification_unknown() -> None:
    with pytest.raises(InputError, match="ssl.endpoint.identification.algorithm=ldap is not supported"):
        build({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"})


def test_inline_pem_written_to_private_temp_files(tmp_path: Path) -> None:
    config = build({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                    "ssl.truststore.certificates": folded(CERT), "ssl.keystore.type": "PEM",
                    "ssl.keystore.certificate.chain": folded(CERT),
                    "ssl.keystore.key": folded(ENCRYPTED_KEY), "ssl.key.password": "secret"},
                   pem_dir=str(tmp_path))
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    files = config.temp_files  # type: ignore[attr-defined]
    assert set(files) == {kwargs["ssl_cafile"], kwargs["ssl_certfile"], kwargs["ssl_keyfile"]}
    for path in files:
        assert Path(path).parent == tmp_path
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert Path(kwargs["ssl_cafile"]).read_text() == CERT
    assert Path(kwargs["ssl_keyfile"]).read_text() == ENCRYPTED_KEY
    context = ssl.create_default_context(cafile=kwargs["ssl_cafile"])
    context.load_cert_chain(kwargs["ssl_certfile"], kwargs["ssl_keyfile"], password="secret")
    config.cleanup()  # type: ignore[attr-defined]
    assert not any(os.path.exists(p) for p in files)
    config.cleanup()  # type: ignore[attr-defined]


def test_inline_pem_from_properties_file(tmp_path: Path) -> None:
    body = " \\\n  ".join(KEY.strip().split("\n"))
    path = write(tmp_path, "admin.properties",
                 "security.protocol=SSL\n"
                 f"ssl.keystore.certificate.chain={' '.join(CERT.split())}\n"
                 f"ssl.keystore.key={body}\n")
    config = load_client_config(path, bootstrap_server="h:1", pem_dir=str(tmp_path))
    assert Path(config.client_kwargs["ssl_keyfile"]).read_text() == KEY
    ssl.create_default_context().load_cert_chain(config.client_kwargs["ssl_certfile"],
                                                 config.client_kwargs["ssl_keyfile"])
    config.cleanup()


def test_normalise_pem_keeps_multiple_blocks_and_rejects_garbage() -> None:
    assert normalise_pem(folded(CERT) + "\n" + folded(KEY), key="k") == CERT + KEY
    with pytest.raises(InputError, match="ssl.keystore.key does not contain PEM data"):
        normalise_pem("MIIB...", key="ssl.keystore.key")


def test_inline_pem_error_removes_files_already_written(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="ssl.keystore.key does not contain PEM data"):
        build({"security.protocol": "SSL", "ssl.truststore.certificates": CERT,
               "ssl.keystore.certificate.chain": CERT, "ssl.keystore.key": "not pem"},
              pem_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


JKS_MAGIC = b"\xfe\xed\xfe\xed\x00\x00\x00\x02"


def test_jks_truststore_error_names_pem_alternative(tmp_path: Path) -> None:
    store = tmp_path / "x.jks"
    store.write_bytes(JKS_MAGIC)
    with pytest.raises(InputError) as err:
        build({"security.protocol": "SSL", "ssl.truststore.location": str(store)})
    assert str(err.value) == (
        f"ssl.truststore.location points to a JKS store ({store}); kreassign reads PEM only: "
        f"convert it with `keytool -exportcert -rfc -keystore {store} -alias <ca-alias> "
        "-file ca.pem`, then set ssl.truststore.location=ca.pem and ssl.truststore.type=PEM")


def test_jks_keystore_error(tmp_path: Path) -> None:
    store = tmp_path / "client.jks"
    store.write_bytes(JKS_MAGIC)
    with pytest.raises(InputError, match=r"ssl.keystore.location points to a JKS store .*"
                                         r"keytool -importkeystore .*ssl.keystore.type=PEM"):
        build({"security.protocol": "SSL", "ssl.keystore.type": "JKS",
               "ssl.keystore.location": str(store)})


def test_pkcs12_keystore_error(tmp_path: Path) -> None:
    store = tmp_path / "client.p12"
    store.write_bytes(b"0\x82\x01\x00")
    with pytest.raises(InputError, match=r"points to a PKCS12 store .*openssl pkcs12 -in "):
        build({"security.protocol": "SSL", "ssl.keystore.location": str(store)})
    with pytest.raises(InputError, match=r"ssl.truststore.location points to a PKCS12 store"):
        build({"security.protocol": "SSL", "ssl.truststore.type": "pkcs12",
               "ssl.truststore.location": str(store)})


@pytest.mark.parametrize("props, message", [
    ({"ssl.truststore.location": "/no/such/ca.pem"}, "ssl.truststore.location /no/such/ca.pem does not exist"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "{notpem}"}, "is declared PEM but contains no"),
    ({"ssl.truststore.type": "BKS", "ssl.truststore.location": "{ca}"}, "ssl.truststore.type=BKS is not supported"),
    ({"ssl.truststore.location": "{ca}", "ssl.truststore.certificates": CERT}, "not both"),
    ({"ssl.keystore.location": "{ca}", "ssl.keystore.key": KEY, "ssl.keystore.certificate.chain": CERT}, "not both"),
    ({"ssl.keystore.certificate.chain": CERT}, "must be given together"),
    ({"ssl.keystore.key": KEY}, "must be given together"),
])
def test_ssl_errors(tmp_path: Path, props: dict[str, str], message: str) -> None:
    ca = write(tmp_path, "ca.pem", CERT)
    notpem = write(tmp_path, "notpem.txt", "hello")
    props = {k: v.format(ca=ca, notpem=notpem) if "{" in v and "BEGIN" not in v else v
             for k, v in props.items()}
    with pytest.raises(InputError, match=message):
        build({"security.protocol": "SSL", **props}, pem_dir=str(tmp_path))


def test_every_emitted_setting_is_a_kafka_admin_client_setting(tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient

    ca = write(tmp_path, "ca.pem", CERT)
    config = build({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS,
        "ssl.truststore.location": ca, "ssl.keystore.certificate.chain": CERT, "ssl.keystore.key": KEY,
        "ssl.key.password": "pw", "ssl.endpoint.identification.algorithm": "", "client.id": "x",
        "reconnect.backoff.ms": "1", "reconnect.backoff.max.ms": "2", "connections.max.idle.ms": "3",
        "metadata.max.age.ms": "4", "receive.buffer.bytes": "5", "send.buffer.bytes": "6",
        "client.dns.lookup": "use_all_dns_ips", "request.timeout.ms": "7",
    }, pem_dir=str(tmp_path))
    kwargs = config.admin_kwargs()  # type: ignore[attr-defined]
    assert set(kwargs) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert len(kwargs) == 21
    config.cleanup()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("server", "message"), [
    ("kafka1:90x2", "bootstrap server 'kafka1:90x2': '90x2' is not a port (a number from 1 to 65535)"),
    (":", "bootstrap server ':': '' is not a port"),
    ("kafka1", "bootstrap server 'kafka1' has no port"),
    ("kafka1:0", "'0' is not a port"),
    ("kafka1:65536", "'65536' is not a port"),
    ("a b:9092", "'a b' is not a host name or address"),
    (":9092", "'' is not a host name or address"),
])
def test_bootstrap_addresses_are_checked_before_any_connection(server: str, message: str) -> None:
    from kreassign.cluster.client_config import build_client_config

    with pytest.raises(InputError, match=re.escape(message)):
        build_client_config({}, bootstrap_server=server)


@pytest.mark.parametrize("server", ["kafka1:9092", "127.0.0.1:1", "[::1]:9092", "b-1.msk.amazonaws.com:9098",
                                    "host_with_underscore:9092"])
def test_good_bootstrap_addresses(server: str) -> None:
    from kreassign.cluster.client_config import build_client_config

    assert build_client_config({}, bootstrap_server=server).bootstrap_servers == (server,)
