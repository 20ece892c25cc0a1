"""Users and rights per name prefix from Python (docs/SECURITY.md): a node
started with `Runtime(listen=..., access="policy.toml")` admits only its users, and a client
without a right gets `stampede.PermissionDenied` naming the name and the right, never data.

The password hashes are made with `stampede hash-password`, the command the docs use.
"""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import stampede_bin

import stampede

CONNECT_S = 20.0


def hashed(password: str) -> str:
    done = subprocess.run(
        [stampede_bin(), "hash-password"], input=password, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        policy = Path(directory) / "policy.toml"
        policy.write_text(
            f'[users.camera]\npassword = "{hashed("cam")}"\ncreate = ["camera"]\nwrite = ["camera"]\n\n'
            f'[users.display]\npassword = "{hashed("disp")}"\nread = ["camera"]\n'
        )
        endpoint = f"unixsock-stream/{directory}/node.sock"
        node = stampede.Runtime(listen=endpoint, name="guarded", access=policy)
        try:
            yield endpoint
        finally:
            node.close()


def test_users_get_exactly_their_rights(endpoint: str) -> None:
    camera = stampede.connect(endpoint, CONNECT_S, user="camera", password="cam")
    display = stampede.connect(endpoint, CONNECT_S, user="display", password="disp")
    camera.create_channel("camera/frames")
    reader = display.task(stampede.INFINITY)
    inp = reader.attach_input(display.lookup("camera/frames"))
    producer = camera.task(0)
    producer.attach_output(camera.lookup("camera/frames")).put(0, b"frame")
    assert bytes(inp.get(stampede.OLDEST_UNSEEN, timeout=5).data) == b"frame"

    with pytest.raises(stampede.PermissionDenied) as denied:
        reader.attach_output(display.lookup("camera/frames"))
    assert denied.value.right == "write" and denied.value.name == "camera/frames"
    with pytest.raises(stampede.PermissionDenied) as denied:
        display.create_channel("camera/other")
    assert denied.value.right == "create"
    with pytest.raises(stampede.PermissionDenied, match="no create right"):
        camera.create_channel("tracker/boxes")
    assert display.names("") == ["camera/frames"]


def test_a_wrong_or_missing_password_is_refused(endpoint: str) -> None:
    for user, password in [("display", "cam"), ("nobody", "x"), (None, None)]:
        with pytest.raises(stampede.PermissionDenied) as denied:
            stampede.connect(endpoint, CONNECT_S, user=user, password=password)
        assert denied.value.right == "connect"
    with pytest.raises(stampede.InvalidArgument, match="go together"):
        stampede.connect(endpoint, CONNECT_S, user="display")


def test_a_dashboard_of_a_user_s_runtime_asks_for_that_user_s_login(endpoint: str) -> None:
    display = stampede.connect(endpoint, CONNECT_S, user="display", password="disp")
    with pytest.raises(stampede.InvalidArgument, match="login="):
        stampede.Dashboard(display)
    with pytest.raises(stampede.InvalidArgument, match="connected as"):
        stampede.Dashboard(display, login=("camera", "cam"))
    with stampede.Dashboard(display, login=("display", "disp")) as dash:
        url = dash.url + "api/snapshot"
        for credentials in [None, "display:wrong", "camera:cam"]:
            request = urllib.request.Request(url)
            if credentials is not None:
                token = base64.b64encode(credentials.encode()).decode()
                request.add_header("Authorization", f"Basic {token}")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=CONNECT_S)
            assert refused.value.code == 401
            assert refused.value.headers["WWW-Authenticate"] == 'Basic realm="stampede"'
        request = urllib.request.Request(url)
        request.add_header("Authorization", "Basic " + base64.b64encode(b"display:disp").decode())
        with urllib.request.urlopen(request, timeout=CONNECT_S) as answer:
            assert answer.status == 200
            assert "tasks" in json.loads(answer.read())
    display.close()


def test_a_bad_policy_file_is_refused_with_its_reason(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[users.x]\npassword = "plain text"\n')
    with pytest.raises(stampede.InvalidArgument, match="hash-password"):
        stampede.Runtime(listen=f"unixsock-stream/{tmp_path}/n.sock", access=policy)
