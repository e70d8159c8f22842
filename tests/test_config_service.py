"""The config service: its store, every operation over the bus, and flows driven by pushes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from react_mem.bus.pulsar import PulsarTransport
from react_mem.bus.queues import Queue
from react_mem.bus.rpc import RequestResponseClient
from react_mem.bus.transport import Consumer
from react_mem.config_service.service import ConfigServiceProcessor, ConfigServiceSettings
from react_mem.config_service.store import FILE_NAME, ConfigStore
from react_mem.errors import ConfigurationError, RequestTimeout, TransientError
from react_mem.ping.service import PingProcessor
from react_mem.processor.runtime import resolve_processor
from react_mem.schema import (
    CONFIG_PUSH_QUEUE,
    CONFIG_REQUEST_QUEUE,
    CONFIG_RESPONSE_QUEUE,
    ConfigKey,
    ConfigPush,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
)
from react_mem.schema.ping import PingRequest, PingResponse
from tests.support.ping import answered
from tests.support.recording import eventually
from tests.support.sends import SendsSeen

ConfigClient = RequestResponseClient[ConfigRequest, ConfigResponse]

SEED = """
default:
  processor:ping:
    default:
      topics: {request: "request:tg:ping:default:default"}
  prompt:
    system: Be kind
"""


# -- the store ---------------------------------------------------------------------
def test_store_persists_atomically_and_versions_increase(tmp_path: Path) -> None:
    store = ConfigStore.open(tmp_path)
    assert store.version == 0 and store.snapshot() == {}
    assert store.put("default", [("prompt", "a", "1"), ("prompt", "b", "2")]) == 1
    assert store.put("other", [("flow", "x", '{"k": 1}')]) == 2
    assert store.delete("default", [("prompt", "a"), ("prompt", "missing"), ("nope", "z")]) == 3

    reopened = ConfigStore.open(tmp_path)
    assert reopened.version == 3
    assert reopened.snapshot() == {
        "default": {"prompt": {"b": "2"}},
        "other": {"flow": {"x": '{"k": 1}'}},
    }
    assert reopened.delete("other", [("flow", "x")]) == 4
    assert ConfigStore(tmp_path).snapshot() == {"default": {"prompt": {"b": "2"}}}
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]  # no temp files left


def test_store_reads(tmp_path: Path) -> None:
    store = ConfigStore.open(tmp_path)
    store.put("w2", [("t", "k2", "v2"), ("t", "k1", "v1"), ("u", "k", "x")])
    store.put("w1", [("t", "k3", "v3")])
    assert store.get("w2", "t", "k1") == "v1"
    assert store.get("w2", "t", "nope") is None and store.get("nope", "t", "k1") is None
    assert store.items("w2", "t") == [("k1", "v1"), ("k2", "v2")]
    assert store.items_all_workspaces("t") == [
        ("w1", "k3", "v3"),
        ("w2", "k1", "v1"),
        ("w2", "k2", "v2"),
    ]
    version, config = store.workspace("w2")
    assert version == 2 and config == {"t": {"k1": "v1", "k2": "v2"}, "u": {"k": "x"}}
    config["t"]["k1"] = "changed"  # a copy: the store is unaffected
    assert store.get("w2", "t", "k1") == "v1"


def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ConfigStore.open(tmp_path)
    store.put("default", [("t", "k", "old")])

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(TransientError, match="disk full"):
        store.put("default", [("t", "k", "new")])
    monkeypatch.undo()
    assert store.version == 1 and store.get("default", "t", "k") == "old"
    assert ConfigStore(tmp_path).get("default", "t", "k") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]


def test_store_is_seeded_only_when_never_written(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED)
    data = tmp_path / "data"
    store = ConfigStore.open(data, seed)
    assert store.version == 1
    flow = json.loads(store.get("default", "processor:ping", "default") or "")
    assert flow == {"topics": {"request": "request:tg:ping:default:default"}}
    assert store.get("default", "prompt", "system") == "Be kind"
    store.delete("default", [("prompt", "system"), ("processor:ping", "default")])
    reopened = ConfigStore.open(data, seed)  # emptied on purpose: not seeded again
    assert reopened.version == 2 and reopened.snapshot() == {}


def test_corrupt_store_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text('{"version": "x", "config": []}')
    with pytest.raises(ConfigurationError, match="corrupt"):
        ConfigStore.open(tmp_path)


def test_settings_and_registration(tmp_path: Path) -> None:
    settings = ConfigServiceSettings.load({"id": "cfg", "state_dir": tmp_path})
    assert settings.store_dir == tmp_path / "config"
    explicit = ConfigServiceSettings.load({"id": "cfg", "data_dir": tmp_path / "d"})
    assert explicit.store_dir == tmp_path / "d"
    assert resolve_processor("config-service") is ConfigServiceProcessor


# -- over the bus -------------------------------------------------------------------
@asynccontextmanager
async def config_service(
    transport: PulsarTransport,
    registry: CollectorRegistry,
    data_dir: Path,
    pid: str,
    **settings: object,
) -> AsyncIterator[ConfigServiceProcessor]:
    service = ConfigServiceProcessor(
        ConfigServiceProcessor.Settings.load({"id": pid, "data_dir": data_dir, **settings}),
        transport,
        registry=registry,
    )
    try:
        await service.start()
        yield service
    finally:
        await service.stop()


@asynccontextmanager
async def config_client(transport: PulsarTransport) -> AsyncIterator[ConfigClient]:
    client: ConfigClient = RequestResponseClient(
        transport, CONFIG_REQUEST_QUEUE, CONFIG_RESPONSE_QUEUE, ConfigResponse, timeout=10
    )
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def next_push(pushes: Consumer) -> ConfigPush:
    delivery = await asyncio.wait_for(pushes.receive(), 10)
    await pushes.ack(delivery)
    return ConfigPush.decode(delivery.data)


def put(workspace: str, *values: tuple[str, str, str]) -> ConfigRequest:
    return ConfigRequest(
        operation="put",
        workspace=workspace,
        values=[ConfigValue(type=t, key=k, value=v) for t, k, v in values],
    )


def delete(workspace: str, *keys: tuple[str, str]) -> ConfigRequest:
    return ConfigRequest(
        operation="delete", workspace=workspace, keys=[ConfigKey(type=t, key=k) for t, k in keys]
    )


@pytest.mark.broker
async def test_every_operation_round_trips(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    pushes = await transport.consumer(Queue.parse(CONFIG_PUSH_QUEUE), f"t-{unique}")
    try:
        async with (
            config_service(transport, registry, tmp_path, f"cfg-{unique}"),
            config_client(transport) as client,
        ):
            assert await next_push(pushes) == ConfigPush(version=0)  # the startup poke

            reply = await client.request(
                put("ws-a", ("prompt", "b", "2"), ("prompt", "a", "1"), ("tool", "t", "{}"))
            )
            assert reply.error is None and reply.version == 1
            assert await next_push(pushes) == ConfigPush(
                version=1, changes={"prompt": ["ws-a"], "tool": ["ws-a"]}
            )
            await client.request(put("ws-b", ("prompt", "c", "3")))
            assert (await next_push(pushes)).changes == {"prompt": ["ws-b"]}

            got = await client.request(
                ConfigRequest(
                    operation="get",
                    workspace="ws-a",
                    keys=[ConfigKey(type="prompt", key="a"), ConfigKey(type="prompt", key="zz")],
                )
            )
            assert got.version == 2
            assert got.values == [
                ConfigValue(type="prompt", key="a", value="1"),
                ConfigValue(type="prompt", key="zz", value=""),
            ]

            listed = await client.request(
                ConfigRequest(operation="list", workspace="ws-a", type="prompt")
            )
            assert (listed.version, listed.directory) == (2, ["a", "b"])

            values = await client.request(
                ConfigRequest(operation="getvalues", workspace="ws-a", type="prompt")
            )
            assert values.values == [
                ConfigValue(type="prompt", key="a", value="1"),
                ConfigValue(type="prompt", key="b", value="2"),
            ]

            every = await client.request(ConfigRequest(operation="getvalues-all-ws", type="prompt"))
            assert [(v.workspace, v.key, v.value) for v in every.values] == [
                ("ws-a", "a", "1"),
                ("ws-a", "b", "2"),
                ("ws-b", "c", "3"),
            ]
            keys = await client.request(ConfigRequest(operation="getkeys-all-ws", type="prompt"))
            assert [(v.workspace, v.type, v.key, v.value) for v in keys.values] == [
                ("ws-a", "prompt", "a", ""),
                ("ws-a", "prompt", "b", ""),
                ("ws-b", "prompt", "c", ""),
            ]

            whole = await client.request(ConfigRequest(operation="config", workspace="ws-a"))
            assert whole.version == 2
            assert whole.config == {"prompt": {"a": "1", "b": "2"}, "tool": {"t": "{}"}}

            removed = await client.request(delete("ws-a", ("prompt", "a"), ("tool", "t")))
            assert removed.error is None and removed.version == 3
            assert await next_push(pushes) == ConfigPush(
                version=3, changes={"prompt": ["ws-a"], "tool": ["ws-a"]}
            )
            whole = await client.request(ConfigRequest(operation="config", workspace="ws-a"))
            assert (whole.version, whole.config) == (3, {"prompt": {"b": "2"}})
    finally:
        await pushes.close()


@pytest.mark.broker
async def test_reserved_workspaces_are_not_announced_but_workspace_lifecycle_is(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with (
        config_service(transport, registry, tmp_path, f"cfg-{unique}"),
        config_client(transport) as client,
    ):
        pushes = await transport.consumer(Queue.parse(CONFIG_PUSH_QUEUE), f"t-{unique}")
        try:
            await client.request(put("__template__", ("prompt", "system", "hi")))
            assert await next_push(pushes) == ConfigPush(version=1)
            await client.request(put("__workspaces__", ("workspace", "ws-x", "{}")))
            created = await next_push(pushes)
            assert created.changes == {} and created.workspace_changes is not None
            assert created.workspace_changes.created == ["ws-x"]
            await client.request(delete("__workspaces__", ("workspace", "ws-x")))
            deleted = await next_push(pushes)
            assert deleted.version == 3 and deleted.workspace_changes is not None
            assert deleted.workspace_changes.deleted == ["ws-x"]
            stored = await client.request(
                ConfigRequest(
                    operation="get",
                    workspace="__template__",
                    keys=[ConfigKey(type="prompt", key="system")],
                )
            )
            assert stored.values[0].value == "hi"
        finally:
            await pushes.close()


@pytest.mark.broker
async def test_bad_requests_are_answered_and_the_service_keeps_serving(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    async with (
        config_service(transport, registry, tmp_path, f"cfg-{unique}"),
        config_client(transport) as client,
    ):
        unknown = await client.request(ConfigRequest(operation="frobnicate", workspace="w"))
        assert unknown.error is not None and unknown.error.type == "bad-operation"
        for operation in ("get", "list", "getvalues", "put", "delete", "config"):
            reply = await client.request(ConfigRequest(operation=operation))
            assert reply.error is not None, operation
            assert reply.error.type == "bad-request" and "Workspace" in reply.error.message

        responses = await transport.consumer(Queue.parse(CONFIG_RESPONSE_QUEUE), f"t-{unique}")
        requests = await transport.producer(Queue.parse(CONFIG_REQUEST_QUEUE))
        try:
            await requests.send(b'{"operation": "get", "workspace"', {"id": f"raw-{unique}"})
            deadline = time.monotonic() + 10
            while True:
                delivery = await asyncio.wait_for(responses.receive(), deadline - time.monotonic())
                await responses.ack(delivery)
                if delivery.properties.get("id") == f"raw-{unique}":
                    break
            malformed = ConfigResponse.decode(delivery.data)
            assert malformed.error is not None and malformed.error.type == "malformed"
            assert "ConfigRequest" in malformed.error.message
        finally:
            await requests.close()
            await responses.close()

        assert (await client.request(put("w", ("t", "k", "v")))).version == 1
        still = await client.request(ConfigRequest(operation="list", workspace="w", type="t"))
        assert still.error is None and still.directory == ["k"]


@pytest.mark.broker
async def test_state_survives_a_restart_and_seed_applies_once(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED)
    data = tmp_path / "data"
    request = ConfigRequest(operation="config", workspace="default")
    async with (
        config_service(transport, registry, data, f"cfg-{unique}", seed=seed),
        config_client(transport) as client,
    ):
        seeded = await client.request(request)
        assert seeded.version == 1 and seeded.config["prompt"] == {"system": "Be kind"}
        await client.request(put("default", ("prompt", "system", "Be brief")))
    async with (
        config_service(transport, registry, data, f"cfg2-{unique}", seed=seed),
        config_client(transport) as client,
    ):
        after = await client.request(request)
        assert after.version == 2 and after.config["prompt"] == {"system": "Be brief"}
        assert set(after.config) == {"prompt", "processor:ping"}


# -- flows started and stopped by config pushes -------------------------------------
@pytest.mark.broker
async def test_flows_start_and_stop_by_config_push(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    ping_id = f"ping-{unique}"
    topics = {"request": f"request:tg:ping-{unique}", "response": f"response:tg:ping-{unique}"}
    flow = ConfigValue(
        type=f"processor:{ping_id}",
        key="f1",
        value=json.dumps({"topics": topics, "parameters": {}}),
    )
    ping = PingProcessor(
        PingProcessor.Settings.load({"id": ping_id, "config_timeout": 5}),
        transport,
        registry=registry,
    )
    pings: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, topics["request"], topics["response"], PingResponse
    )
    async with (
        config_service(transport, registry, tmp_path, f"cfg-{unique}"),
        config_client(transport) as client,
    ):
        try:
            await ping.start()  # subscribed to pushes once this returns
            await pings.start()
            assert ping.flows == {}

            put_flow = ConfigRequest(operation="put", workspace="default", values=[flow])
            assert (await client.request(put_flow)).error is None
            reply = await answered(pings)
            assert (reply.processor, reply.workspace, reply.flow) == (ping_id, "default", "f1")

            gone = await client.request(delete("default", (flow.type, flow.key)))
            assert gone.error is None
            await eventually(lambda: not ping.flows)
            with pytest.raises(RequestTimeout):
                await pings.request(PingRequest(message="anyone?"), timeout=1.0)

            assert (await client.request(put_flow)).error is None
            assert (await answered(pings)).flow == "f1"
            assert list(ping.flows) == [("default", "f1")]
        finally:
            await pings.close()
            await ping.stop()


@pytest.mark.broker
async def test_processor_started_before_the_config_service_gets_its_flows(
    transport: PulsarTransport, registry: CollectorRegistry, tmp_path: Path, unique: str
) -> None:
    """Its first config request is dropped (no subscriber yet); it must ask again, soon."""
    ping_id = f"ping-{unique}"
    topics = {"request": f"request:tg:ping-{unique}", "response": f"response:tg:ping-{unique}"}
    seed = tmp_path / "seed.yaml"
    seed.write_text(json.dumps({"default": {f"processor:{ping_id}": {"f1": {"topics": topics}}}}))
    seen = SendsSeen(transport)
    ping = PingProcessor(
        PingProcessor.Settings.load({"id": ping_id, "config_timeout": 60}),
        seen,
        registry=registry,
    )
    pings: RequestResponseClient[PingRequest, PingResponse] = RequestResponseClient(
        transport, topics["request"], topics["response"], PingResponse
    )
    await ping.start()
    await pings.start()
    try:
        await seen.wait_sent(CONFIG_REQUEST_QUEUE)  # its first fetch goes out to nobody
        async with config_service(transport, registry, tmp_path, f"cfg-{unique}", seed=seed):
            assert (await answered(pings)).flow == "f1"  # within answered's 15 s, not 60
        assert seen.sent[CONFIG_REQUEST_QUEUE] >= 2  # it asked again
    finally:
        await pings.close()
        await ping.stop()
