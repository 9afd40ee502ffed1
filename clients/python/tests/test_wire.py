"""The codec against wire/vectors.json, PROTOCOL.md's varint table, and hostile bytes."""

from __future__ import annotations

import asyncio
import json
import random
import re
import struct
from pathlib import Path

import pytest

from lintel import errors as e
from lintel.transport import Connection, Handshake, Welcomed
from lintel.wire import FRAMES, FrameDecoder, decode_body, encode_frame, lower_frame, view
from lintel.wire import frames as f
from lintel.wire import types as t
from lintel.wire.varint import decode_varint, encode_varint

REPO = Path(__file__).resolve().parents[3]
VECTORS = json.loads((REPO / "wire" / "vectors.json").read_text())["vectors"]
BY_NAME = {v["name"]: v for v in VECTORS}


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_every_vector_decodes_to_its_fields_and_re_encodes_byte_for_byte(vector: dict) -> None:
    raw = bytes.fromhex(vector["hex"])
    decoder = FrameDecoder()
    decoder.feed(raw)
    frame = decoder.next_frame(vector["version"])
    assert decoder.buffered() == 0
    assert FRAMES[vector["kind"]].name == vector["frame"]
    assert FRAMES[vector["kind"]].body is type(frame)
    assert view(frame) == vector["fields"]
    assert encode_frame(frame) == raw


def test_vectors_cover_every_frame_kind_below_features_or_protocol_md_does() -> None:
    kinds = {v["kind"] for v in VECTORS}
    # Kinds without a vector still round-trip through a value built here.
    missing = [row for row in FRAMES if row.number not in kinds]
    for row in missing:
        frame = _sample(row.body)
        assert decode_body(encode_frame(frame)[4:]) == frame, row.name


def _sample(cls: type) -> object:
    req = t.DispatchRequest("ns", "", "a", None, "wf", 1, None, 1, b"x", None)
    samples: dict[type, object] = {
        f.CapacityUpdate: f.CapacityUpdate(4),
        f.Cancel: f.Cancel(9),
        f.Ping: f.Ping(2**64 - 1),
        f.Pong: f.Pong(0),
        f.Drain: f.Drain(5000),
        f.Drained: f.Drained(3),
        f.Goodbye: f.Goodbye("bye"),
        f.StatusQuery: f.StatusQuery(1),
        f.Status: f.Status(
            1,
            t.NodeStatus(
                "n", 5, 2, False,
                [t.PoolStatus("ns", "default", "aion.dispatch.ns.default",
                              [t.WorkerStatus(1, 2, "w", None, ["a"], 3, 0, True)])],
                [t.WaitingStatus("ns", "q", "a", 1, t.Census(t.NoWorkerReason.PoolEmpty, 0, 0, 0, 0, 0, 7))],
                t.Counters(*range(12)),
            ),
        ),  # fmt: skip
        f.Push3: f.Push3(1, req, t.RequestExtras()),
        f.Submit: f.Submit(1, req, None, 5, t.Require(["x"])),
    }
    return samples[cls]


@pytest.mark.parametrize(
    "value,bits,hexed",
    [
        (int(a), {"u16": 16, "u32": 32, "u64": 64}[b], "".join(c.split()))
        for a, b, c in re.findall(
            r"^\s+(\d+)\s+(u\d+)\s+([0-9a-f ]+)$",
            (REPO / "wire" / "PROTOCOL.md").read_text().split("<!-- text:varints -->")[1].split("<!--")[0],
            re.M,
        )
    ],
)
def test_varints_are_written_as_protocol_md_lists_them(value: int, bits: int, hexed: str) -> None:
    assert encode_varint(value, bits).hex() == hexed
    assert decode_varint(bytes.fromhex(hexed), 0, bits) == (value, len(hexed) // 2)


def test_varints_that_overflow_or_run_past_their_limit_are_malformed() -> None:
    with pytest.raises(e.Malformed):
        decode_varint(bytes.fromhex("ffff04"), 0, 16)  # 3rd byte above 03
    with pytest.raises(e.Malformed):
        decode_varint(bytes.fromhex("ffffffff10"), 0, 32)
    with pytest.raises(e.Malformed):
        decode_varint(bytes.fromhex("ff" * 9 + "02"), 0, 64)
    with pytest.raises(e.Malformed):
        decode_varint(bytes.fromhex("8080"), 0, 64)  # cut short
    with pytest.raises(e.EncodeError):
        encode_varint(1 << 16, 16)


def test_a_truncated_varint_inside_a_body_is_malformed() -> None:
    body = bytes.fromhex("0c") + b"\x80\x80"  # Ping, nonce cut short
    with pytest.raises(e.Malformed):
        decode_body(body)


@pytest.mark.parametrize(
    "body,error",
    [
        (b"", e.MissingKind),
        (bytes.fromhex("8c00"), e.MissingKind),  # non-canonical kind 12
        (bytes.fromhex("ffffffff1f"), e.MissingKind),  # kind above u32::MAX
        (bytes.fromhex("80"), e.MissingKind),
        (bytes.fromhex("2f"), e.UnknownKind),  # 47
        (bytes.fromhex("0c0100"), e.TrailingBytes),
        (bytes.fromhex("1005") + b"\xff\xfe\xfd\xfc\xfb", e.Malformed),  # Goodbye, bad UTF-8
        (bytes.fromhex("0002"), e.Malformed),  # Hello cut short
        (bytes.fromhex("010100ffffffffffffffffff7f"), e.Malformed),  # length far past the body
        (bytes.fromhex("1802ff"), e.Malformed),  # ServedOutcome: string runs past the body
        (bytes.fromhex("2b0500000000000a"), e.Malformed),  # Session token of 5 bytes
    ],
)
def test_hostile_bodies_raise_typed_wire_errors(body: bytes, error: type) -> None:
    with pytest.raises(error):
        decode_body(body)


def test_a_kind_the_connections_version_does_not_know_is_kind_too_new() -> None:
    body = encode_frame(f.Progress(1, b""))[4:]
    with pytest.raises(e.KindTooNew) as caught:
        decode_body(body, version=3)
    assert isinstance(caught.value, e.UnexpectedFrame)
    assert decode_body(body, version=4) == f.Progress(1, b"")


def test_an_unknown_outcome_variant_is_a_typed_unknown_variant() -> None:
    # ServedOutcome{correlation 5, "n", result variant 11}: from a newer node.
    body = bytes.fromhex("1805016e0b2a")
    with pytest.raises(e.UnknownVariant) as caught:
        decode_body(body)
    assert (caught.value.enum, caught.value.index) == ("DispatchResult", 11)
    assert isinstance(caught.value, e.Malformed)


def test_a_length_over_the_maximum_is_oversize_before_the_body_is_buffered() -> None:
    decoder = FrameDecoder(max_frame_len=1024)
    decoder.feed(struct.pack(">I", 1025) + b"\x0c")
    with pytest.raises(e.Oversize) as caught:
        decoder.next_body()
    assert (caught.value.length, caught.value.max_len) == (1025, 1024)
    with pytest.raises(e.FrameTooLarge):
        encode_frame(f.Goodbye("x" * 2000), max_frame_len=1024)


def test_partial_input_is_none_and_a_stream_cut_mid_frame_is_truncated() -> None:
    raw = bytes.fromhex(BY_NAME["push"]["hex"])
    decoder = FrameDecoder()
    for i, byte in enumerate(raw[:-1]):
        decoder.feed(bytes([byte]))
        assert decoder.next_body() is None, i
    with pytest.raises(e.Truncated):
        decoder.finish()
    decoder.feed(raw[-1:])
    assert isinstance(decoder.next_frame(), f.Push)
    decoder.finish()


def test_mutated_vectors_never_raise_anything_but_wire_errors() -> None:
    rng = random.Random(7)
    bodies = [bytes.fromhex(v["hex"])[4:] for v in VECTORS]
    for _ in range(20000):
        body = bytearray(rng.choice(bodies))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            if op == 0 and body:
                body[rng.randrange(len(body))] = rng.randrange(256)
            elif op == 1 and body:
                del body[rng.randrange(len(body)) :]
            else:
                body.insert(rng.randrange(len(body) + 1), rng.randrange(256))
        try:
            frame = decode_body(bytes(body))
        except e.WireError:
            continue
        # What decodes re-encodes to a body that decodes to the same frame.
        assert decode_body(encode_frame(frame)[4:]) == frame


def test_a_writer_lowers_what_an_unlisted_or_older_reader_cannot_read() -> None:
    def lowered(name: str, version: int) -> str:
        v = BY_NAME[name]
        frame = decode_body(bytes.fromhex(v["hex"])[4:])
        return encode_frame(lower_frame(frame, version, ())).hex()

    hb = BY_NAME["served-outcome-heartbeat-timeout-unlisted"]["hex"]
    assert lowered("served-outcome-heartbeat-timeout", 4) == hb
    rng = BY_NAME["served-outcome-role-not-granted-unlisted"]["hex"]
    assert lowered("served-outcome-role-not-granted", 4) == rng
    assert lowered("served-outcome-no-worker3", 2) == BY_NAME["served-outcome-no-worker3-v2"]["hex"]
    # A Progress is not sent to a reader that did not list it; a Submit3 with headers cannot
    # be carried on version 2.
    assert lower_frame(f.Progress(1, b"x"), 4, ()) is None
    submit3 = decode_body(bytes.fromhex(BY_NAME["submit3"]["hex"])[4:])
    with pytest.raises(e.NeedsVersion):
        lower_frame(submit3, 2)
    register3 = decode_body(bytes.fromhex(BY_NAME["register3"]["hex"])[4:])
    with pytest.raises(e.NeedsVersion):
        lower_frame(register3, 2)


def test_the_node_closing_mid_frame_is_a_typed_truncated_error_not_a_hang() -> None:
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(bytes.fromhex(BY_NAME["push"]["hex"])[:20])  # half a Push
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        limits = t.Limits(1 << 22, 1024, 10000, 3, 255, 64)
        conn = Connection(reader, writer, Welcomed(4, "fake", 1, limits, None), Handshake(t.Role.Worker), "fake")
        with pytest.raises(e.Truncated):
            await asyncio.wait_for(conn.read_burst(), 5)
        conn.abort()
        server.close()
        await server.wait_closed()

    asyncio.run(scenario())


def test_the_node_sending_an_oversize_length_is_refused_without_reading_it() -> None:
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(struct.pack(">I", 0xFFFFFFFF) + b"\x07")
            await writer.drain()
            await reader.read()  # holds the connection open: the client must not wait for more

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        limits = t.Limits(1 << 22, 1024, 10000, 3, 255, 64)
        conn = Connection(reader, writer, Welcomed(4, "fake", 1, limits, None), Handshake(t.Role.Worker), "fake")
        with pytest.raises(e.Oversize):
            await asyncio.wait_for(conn.read_burst(), 5)
        conn.abort()
        server.close()
        await server.wait_closed()

    asyncio.run(scenario())
