"""Plain ACL: signatures (checked against the stock C++ client's frames), white-list
patterns, the accounts file, the per-code resources and the refusal order."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aiorocketmq.broker.acl import (
    AclAccounts,
    AclConfigError,
    editor,
    load_acl_files,
    needed_resources,
    parse_acl_document,
    parse_address_pattern,
    refusal,
)
from aiorocketmq.broker.acl.plain import ANY, DENY, PUB, SUB, acl_files, check_permission
from aiorocketmq.common.protocol_bodies import ConsumerData, HeartbeatData, SubscriptionData
from aiorocketmq.remoting.acl_sign import (
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    SessionCredentials,
    calculate_signature,
    request_signature,
    sign_request,
)
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.frame import FrameDecoder
from tests.support.vectors import load_jsonl

REMOTE = "127.0.0.1:50000"
ACCOUNTS_YAML = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 87654321
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def _accounts(text: str = ACCOUNTS_YAML) -> AclAccounts:
    white, accounts = parse_acl_document(yaml.safe_load(text), "test")
    return AclAccounts(tuple(white), {a.access_key: a for a in accounts})


def _signed(
    code: int,
    fields: dict[str, str],
    body: bytes = b"",
    *,
    ak: str = "RocketMQ",
    sk: str = "12345678",
) -> RemotingCommand:
    request = RemotingCommand.request(code, dict(fields), body)
    sign_request(request, SessionCredentials(ak, sk))
    return request


# -- signatures ---------------------------------------------------------------------


def test_every_stock_cpp_request_carries_the_signature_we_compute() -> None:
    # The C++ client signs even without credentials (AccessKey "", secret ""), so its
    # captured frames pin the algorithm: sorted values + body, HMAC-SHA1, base64.
    checked = 0
    for line in load_jsonl("cpp_client.jsonl"):
        if line["is_response"] or line["origin"] != "client":
            continue
        [cmd] = FrameDecoder().feed(bytes.fromhex(line["frame_hex"]))
        if SIGNATURE not in cmd.ext_fields:
            continue
        assert request_signature(cmd, "") == cmd.ext_fields[SIGNATURE], line["code_name"]
        checked += 1
    assert checked >= 100


def test_signature_over_scatter_parts_equals_one_body() -> None:
    fields = {"topic": "T", "AccessKey": "ak12345"}
    whole = calculate_signature(fields, [b"hello world"], "secret1")
    request = RemotingCommand.request(10, dict(fields))
    request.body_parts = BodyParts([b"hello", b" ", b"world"])
    assert request_signature(request, "secret1") == whole
    assert calculate_signature(fields, [b"hello world!"], "secret1") != whole


def test_signing_twice_gives_the_same_fields() -> None:
    request = _signed(10, {"topic": "topicB"}, b"x")
    first = dict(request.ext_fields)
    sign_request(request, SessionCredentials("RocketMQ", "12345678"))
    assert request.ext_fields == first
    assert SessionCredentials("RocketMQ", "12345678", "tok").security_token == "tok"
    with pytest.raises(ValueError):
        SessionCredentials("", "x")


# -- addresses ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["127.0.0.1"]),
        ("10.10.103.*", ["10.10.103.0", "10.10.103.255"], ["10.10.104.1", "::1"]),
        ("10.10.*.*", ["10.10.0.1", "10.10.255.3"], ["10.11.0.1"]),
        ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
        ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
        ("1.2.3.4,5.6.7.8", ["1.2.3.4", "5.6.7.8"], ["1.2.3.5"]),
        ("127.0.0.2", ["127.0.0.2"], ["127.0.0.1", "not-an-ip"]),
        ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
        ("fe80::1-ff", ["fe80::1", "fe80::ff"], ["fe80::100"]),
        ("fe80::{1,2}", ["fe80::2"], ["fe80::3"]),
    ],
)
def test_white_list_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    match = parse_address_pattern(pattern)
    assert all(match(a) for a in inside)
    assert not any(match(a) for a in outside)


@pytest.mark.parametrize(
    "pattern", ["1.2.3", "300.1.1.1", "1.2.3.20-10", "1.2.3.{1,x}", "a.b.c.*", "1.2.3.-5"]
)
def test_bad_white_list_pattern_is_a_config_error(pattern: str) -> None:
    with pytest.raises(AclConfigError):
        parse_address_pattern(pattern)


# -- permissions and files ----------------------------------------------------------


def test_check_permission_is_javas() -> None:
    assert check_permission(PUB, PUB | SUB)
    assert not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)
    assert check_permission(ANY, SUB)
    assert not check_permission(ANY, DENY)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "longer than 6"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 123\n", "longer than 6"),
        ("accounts:\n  - accessKey: longenough\n    secretKey: 1234567\n    topicPerms: [x]\n",
         "permission failed for topic:x"),
        ("globalWhiteRemoteAddresses: 1.2.3.4\n", "must be a list"),
        ("- just a list\n", "must be a mapping"),
    ],
)  # fmt: skip
def test_bad_documents_name_the_problem(text: str, reason: str) -> None:
    with pytest.raises(AclConfigError, match=reason):
        _accounts(text)


def test_files_are_read_from_the_acl_dir_then_the_default_file(tmp_path: Path) -> None:
    acl_dir = tmp_path / "conf" / "acl"
    (acl_dir / "team").mkdir(parents=True)
    (acl_dir / "team" / "a.yml").write_text(
        "accounts:\n  - accessKey: dupkey1\n    secretKey: fromdir1\n"
    )
    (acl_dir / "notes.txt").write_text("ignored")
    default = tmp_path / "conf" / "plain_acl.yml"
    default.write_text(
        "globalWhiteRemoteAddresses: ['127.0.0.9']\n"
        "accounts:\n  - accessKey: dupkey1\n    secretKey: fromdefault\n"
    )
    paths = acl_files(default, acl_dir)
    assert paths == [acl_dir / "team" / "a.yml", default]
    accounts = load_acl_files(paths)
    assert accounts.accounts["dupkey1"].secret_key == "fromdir1"  # the first one wins
    assert accounts.globally_white("127.0.0.9")
    (acl_dir / "bad.yml").write_text("accounts: [\n")
    with pytest.raises(AclConfigError, match=r"bad\.yml"):
        load_acl_files(acl_files(default, acl_dir))


# -- what each request needs --------------------------------------------------------


def test_needed_resources_by_code() -> None:
    def needed(code: int, **fields: str) -> dict[str, int]:
        return needed_resources(RemotingCommand.request(code, fields))

    assert needed(RequestCode.SEND_MESSAGE, topic="t") == {"t": PUB}
    assert needed(RequestCode.SEND_MESSAGE_V2, b="t", a="pg") == {"t": PUB}
    assert needed(RequestCode.SEND_BATCH_MESSAGE, b="t") == {"t": PUB}
    assert needed(RequestCode.SEND_MESSAGE_V2, b="%RETRY%g") == {"%RETRY%g": SUB}
    assert needed(RequestCode.PULL_MESSAGE, topic="t", consumerGroup="g") == {
        "t": SUB,
        "%RETRY%g": SUB,
    }
    assert needed(RequestCode.CONSUMER_SEND_MSG_BACK, group="g") == {"%RETRY%g": SUB}
    assert needed(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="g", topic="t") == {
        "%RETRY%g": SUB,
        "t": SUB,
    }
    assert needed(RequestCode.UNREGISTER_CLIENT, producerGroup="pg") == {}
    assert needed(RequestCode.GET_BROKER_RUNTIME_INFO) == {}
    heartbeat = HeartbeatData(
        "c1",
        consumers=[
            ConsumerData("g", subscriptions=[SubscriptionData("t"), SubscriptionData("%RETRY%g")])
        ],
    )
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, heartbeat.encode())
    assert needed_resources(request) == {"%RETRY%g": SUB, "t": SUB}


# -- the order of checks ------------------------------------------------------------


def test_refusals_in_javas_order_and_words() -> None:
    accounts = _accounts()
    pull = {"topic": "topicB", "consumerGroup": "groupB", "queueId": "0"}
    # Unsigned: no AccessKey; an unknown one; a bad signature.
    unsigned = RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(pull))
    assert refusal(accounts, unsigned, REMOTE) == "No accessKey is configured"
    stranger = _signed(RequestCode.PULL_MESSAGE, pull, ak="Stranger")
    assert refusal(accounts, stranger, REMOTE) == "No acl config for Stranger"
    forged = _signed(RequestCode.PULL_MESSAGE, pull, sk="wrong-secret")
    assert refusal(accounts, forged, REMOTE) == "Check signature failed for accessKey=RocketMQ"
    tampered = _signed(RequestCode.PULL_MESSAGE, pull)
    tampered.ext_fields["queueId"] = "1"
    assert refusal(accounts, tampered, REMOTE) == "Check signature failed for accessKey=RocketMQ"
    # Signed: per-resource and default permissions.
    assert refusal(accounts, _signed(RequestCode.PULL_MESSAGE, pull), REMOTE) is None
    denied_group = _signed(RequestCode.PULL_MESSAGE, {**pull, "consumerGroup": "groupA"})
    assert refusal(accounts, denied_group, REMOTE) == "No default permission for group=groupA"
    default_topic = _signed(RequestCode.SEND_MESSAGE, {"topic": "other"})
    assert refusal(accounts, default_topic, REMOTE) == "No default permission for topic=other"
    sub_only = _signed(RequestCode.SEND_MESSAGE, {"topic": "topicC"})
    assert refusal(accounts, sub_only, REMOTE) == "No default permission for topic=topicC"
    trace = _signed(RequestCode.SEND_MESSAGE, {"topic": "RMQ_SYS_TRACE_TOPIC"})
    assert refusal(accounts, trace, REMOTE) is None
    # Admin codes.
    create = {"topic": "topicB"}
    assert refusal(accounts, _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create), REMOTE) == (
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    )
    admin = _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create, ak="rocketmq2", sk="87654321")
    assert refusal(accounts, admin, REMOTE) is None
    # White lists: global (no credentials at all) and the account's (no signature).
    assert refusal(accounts, unsigned, "192.168.0.2:1234") is None
    assert refusal(accounts, unsigned, "192.168.0.3:1234") == "No accessKey is configured"
    unsigned_admin = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"AccessKey": "rocketmq2"})
    assert refusal(accounts, unsigned_admin, "192.168.1.77:1") is None
    assert refusal(accounts, unsigned_admin, REMOTE) is not None


def test_unique_key_query_signed_either_way() -> None:
    accounts = _accounts()
    fields = {"topic": "topicB", "key": "k", "maxNum": "32", "beginTimestamp": "0"}
    # The Java client signs the flag; the Java broker checks without it. Both pass.
    client_signed = _signed(RequestCode.QUERY_MESSAGE, {**fields, UNIQUE_MSG_QUERY_FLAG: "true"})
    assert refusal(accounts, client_signed, REMOTE) is None
    broker_form = _signed(RequestCode.QUERY_MESSAGE, fields)
    broker_form.ext_fields[UNIQUE_MSG_QUERY_FLAG] = "true"
    assert refusal(accounts, broker_form, REMOTE) is None


def test_unreadable_heartbeat_is_refused_not_raised() -> None:
    bad = _signed(RequestCode.HEART_BEAT, {}, b"{not json")
    reason = refusal(_accounts(), bad, REMOTE)
    assert reason is not None and reason.startswith("cannot read the request's resources")


# -- file edits (mqadmin updateAclConfig...) ----------------------------------------


def test_editor_merges_versions_and_never_writes_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACCOUNTS_YAML, "utf-8")
    editor.update_account(path, {"accessKey": "RocketMQ", "defaultTopicPerm": "PUB"})
    doc = yaml.safe_load(path.read_text("utf-8"))
    account = next(a for a in doc["accounts"] if a["accessKey"] == "RocketMQ")
    # Fields not given keep their values (Java's createAclAccessConfigMap).
    assert account["defaultTopicPerm"] == "PUB" and str(account["secretKey"]) == "12345678"
    assert account["topicPerms"] == ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"]
    assert doc["dataVersion"][0]["counter"] == 1
    editor.update_account(path, {"accessKey": "newbie01", "secretKey": "secret01"})
    assert editor.data_version(path)["counter"] == 2
    assert set(load_acl_files([path]).accounts) == {"RocketMQ", "rocketmq2", "newbie01"}
    before = path.read_text("utf-8")
    with pytest.raises(AclConfigError, match="longer than 6"):
        editor.update_account(path, {"accessKey": "short"})
    with pytest.raises(AclConfigError, match="needs a secretKey"):
        editor.update_account(path, {"accessKey": "another01"})
    with pytest.raises(AclConfigError):
        editor.update_global_white(path, ["300.1.1.1"])
    with pytest.raises(AclConfigError, match="permission failed"):
        editor.update_account(path, {"accessKey": "newbie01", "groupPerms": ["g"]})
    assert path.read_text("utf-8") == before  # nothing malformed was written
    assert editor.delete_account(path, "newbie01") is True
    assert editor.delete_account(path, "newbie01") is False
    editor.update_global_white(path, ["127.0.0.1", " "])
    assert load_acl_files([path]).globally_white("127.0.0.1")
    assert editor.data_version(tmp_path / "absent.yml") == {"counter": 0, "timestamp": 0}
