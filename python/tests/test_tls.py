"""TLS endpoints from Python (docs/SECURITY.md): `Runtime(listen="tls/...",
tls_certificate=..., tls_private_key=...)` serves clients that trust its CA through
`stampede.connect(..., tls_root_ca=...)`; a client trusting another CA, a client without a
certificate in mutual mode, and a plain `tcp/` client are refused with Unreachable within their
timeout; unusable TLS arguments are InvalidArgument.

The certificates are made at run time with the `openssl` command (the one docs/SECURITY.md uses);
the tests are skipped when it is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import stampede

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="the openssl command is needed to make the test certificates"
)

#: A serving runtime, its port, and whether it requires client certificates.
Node = tuple[stampede.Runtime, int, bool]
#: How long a client that must fail tries.
REFUSED_S = 2.0
#: Slack beyond a client's timeout before a refusal counts as a hang.
HANG_SLACK_S = 5.0
#: How long a client that must succeed tries.
CONNECT_S = 20.0


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def authority(directory: Path, name: str, subject: str) -> None:
    """A self-signed CA: `<name>.pem` and `<name>.key`."""
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={subject}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout", f"{name}.key", "-out", f"{name}.pem",
        cwd=directory,
    )  # fmt: skip


def signed(directory: Path, name: str, extensions: str) -> None:
    """`<name>.pem` and `<name>.key`, signed by `ca.pem`, with the given X.509 extensions."""
    (directory / f"{name}.ext").write_text(extensions)
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=stampede-{name}",
        "-keyout", f"{name}.key", "-out", f"{name}.csr",
        cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ca.pem, node.pem/.key (127.0.0.1, localhost), client.pem/.key signed by it,
    and other-ca.pem, a CA that signed nothing here."""
    directory = tmp_path_factory.mktemp("pki")
    authority(directory, "ca", "Stampede test CA")
    authority(directory, "other-ca", "Another CA")
    node_names = "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    signed(directory, "node", node_names + "extendedKeyUsage=serverAuth,clientAuth\n")
    signed(directory, "client", "extendedKeyUsage=clientAuth\n")
    return directory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=[False, True], ids=["server-only", "mutual"])
def node(request: pytest.FixtureRequest, pki: Path) -> Iterator[Node]:
    """An embedded runtime serving on tls/127.0.0.1:<port>, mutual or not."""
    mutual: bool = request.param
    port = free_port()
    with stampede.Runtime(
        listen=f"tls/127.0.0.1:{port}",
        name="secure",
        tls_certificate=pki / "node.pem",
        tls_private_key=str(pki / "node.key"),
        tls_root_ca=pki / "ca.pem",
        tls_mutual=mutual,
    ) as rt:
        yield rt, port, mutual


def refused(endpoint: str, **tls: object) -> str:
    """Connects and expects Unreachable within the timeout (plus slack); returns its message."""
    started = time.monotonic()
    with pytest.raises(stampede.Unreachable) as refusal:
        stampede.connect(endpoint, REFUSED_S, **tls)  # type: ignore[arg-type]
    assert time.monotonic() - started < REFUSED_S + HANG_SLACK_S
    return str(refusal.value)


def test_a_client_over_tls_puts_and_the_node_gets(node: Node, pki: Path) -> None:
    """A client trusting the node's CA (with its certificate in mutual mode) puts through the TLS
    link and the node's own runtime gets the item."""
    rt, port, mutual = node
    frames = rt.create_channel("secure/frames")
    inp = rt.task(stampede.INFINITY).attach_input(frames)
    certificate, key = (pki / "client.pem", pki / "client.key") if mutual else (None, None)
    endpoint = f"tls/127.0.0.1:{port}"
    ca = pki / "ca.pem"
    with stampede.connect(
        endpoint, CONNECT_S, tls_root_ca=ca, tls_certificate=certificate, tls_private_key=key
    ) as client:
        assert client.node == "secure"
        client.task(0).attach_output(client.lookup("secure/frames")).put(3, "over TLS")
        assert bytes(inp.get(3, timeout=CONNECT_S).data) == b"over TLS"


def test_a_client_trusting_another_ca_is_unreachable(node: Node, pki: Path) -> None:
    """The handshake fails: Unreachable naming TLS and the root CA, within the timeout."""
    _, port, _ = node
    message = refused(f"tls/127.0.0.1:{port}", tls_root_ca=pki / "other-ca.pem")
    assert "TLS" in message and "root CA" in message


def test_mutual_tls_refuses_a_client_without_a_certificate(node: Node, pki: Path) -> None:
    """A node in mutual mode refuses a client that presents no certificate."""
    _, port, mutual = node
    if not mutual:
        pytest.skip("only a node in mutual mode asks for a client certificate")
    assert "mutual TLS" in refused(f"tls/127.0.0.1:{port}", tls_root_ca=pki / "ca.pem")


def test_a_plain_tcp_client_cannot_talk_to_a_tls_listener(node: Node) -> None:
    """A tcp/ client on the tls/ listener's port is refused: Unreachable within its timeout."""
    _, port, _ = node
    refused(f"tcp/127.0.0.1:{port}")


def test_unusable_tls_arguments_are_invalid(pki: Path) -> None:
    """A tls/ listener without certificates, a missing file, a certificate without its key, TLS
    files for a tcp/ endpoint: InvalidArgument, before any connection."""
    endpoint = f"tls/127.0.0.1:{free_port()}"
    with pytest.raises(stampede.InvalidArgument):
        stampede.Runtime(listen=endpoint)
    with pytest.raises(stampede.InvalidArgument):
        stampede.Runtime(listen=endpoint, tls_certificate=pki / "gone.pem", tls_private_key=pki / "node.key")
    with pytest.raises(stampede.InvalidArgument):
        stampede.Runtime(listen=endpoint, tls_certificate=pki / "node.pem")
    with pytest.raises(stampede.InvalidArgument):
        stampede.Runtime(tls_certificate=pki / "node.pem", tls_private_key=pki / "node.key")
    with pytest.raises(stampede.InvalidArgument):
        stampede.connect(endpoint, REFUSED_S, tls_root_ca=pki / "ca.pem", tls_certificate=pki / "client.pem")
    with pytest.raises(stampede.InvalidArgument):
        stampede.connect("tcp/127.0.0.1:7447", REFUSED_S, tls_root_ca=pki / "ca.pem")
