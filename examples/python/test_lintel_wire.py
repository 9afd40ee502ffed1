"""Checks lintel_wire against the hex dumps and varint table of wire/PROTOCOL.md.

Each dump is read from the document itself, decoded, compared with the value the document
states, and re-encoded to the same bytes. Run: python3 examples/python/test_lintel_wire.py
"""

import re
import struct
import unittest
from pathlib import Path

import lintel_wire as w

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "wire" / "PROTOCOL.md"


def doc_blocks(kind: str) -> dict:
    """name -> text of every ``<!-- kind:name -->`` fenced block in PROTOCOL.md."""
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    pattern = re.compile(
        rf"<!-- {kind}:([a-z0-9-]+) -->\n```text\n(.*?)```\n<!-- /{kind}:\1 -->", re.S
    )
    return {name: body for name, body in pattern.findall(text)}


def dump(name: str) -> bytes:
    return bytes.fromhex(HEX[name].replace("\n", " "))


HEX = doc_blocks("hex") if PROTOCOL_MD.exists() else {}

R = w.DispatchRequest(
    namespace="remote",
    task_queue="gpu",
    activity_type="render",
    node=None,
    workflow_id="wf-1",
    ordinal=3,
    run_id="r1",
    attempt=1,
    input=bytes([1, 2, 3]),
    deadline_unix_ms=1700000000000,
)
OK = w.DispatchResponse("wf-1", 3, "r1", w.Success(b"ok"))

# What PROTOCOL.md section 12 says each dump holds.
EXPECTED = {
    "hello": w.Hello("Worker", "gpu-worker", "s3cret", 1, 1),
    "welcome": w.Welcome(1, "node-a", 7, w.Limits(4194304, 1024, 10000, 3, 255, 64)),
    "hello-refused": w.HelloRefused("VersionMismatch", "need 2..3"),
    "register": w.Register(["remote"], ["render", "encode"], 300, "w1", "gpu", "box-7"),
    "registered": w.Registered(42),
    "push": w.Push(1000, R),
    "reply": w.Reply(1000, OK),
    "submit": w.Submit(5, R, 2000, None, w.Prefer(["box-7", "box-9"])),
    "outcome": w.Outcome(5, w.Completed(OK)),
    "outcome-no-worker": w.Outcome(
        6, w.NoWorker(w.Census("AllAtCapacity", 3, 2, 1, 1, 0, None))
    ),
    "error": w.Error("UnexpectedFrame", "Submit"),
    "hello-peer": w.Hello("Peer", "node-a", "mesh-key", 2, 2),
    "served-outcome": w.ServedOutcome(5, "node-a", w.PeerLost("node-b", 1200)),
    # What a reader that did not list the feature gets: the version-2 outcome, byte for byte.
    "served-outcome-heartbeat-timeout-unlisted": w.ServedOutcome(
        5, "node-a", w.Timeout(42, 31000)
    ),
    "served-outcome-role-not-granted-unlisted": w.ServedOutcome(
        8, "node-a", w.RefusedDispatch("NamespaceNotGranted", "role producer")
    ),
    # What a version-2 producer reads where a version-3 one gets NoWorker3.
    "served-outcome-no-worker3-v2": w.ServedOutcome(
        6, "node-a", w.NoWorker(w.Census("AllExcluded", 3, 2, 2, 0, 2, None))
    ),
}
PEER_LINK_DUMPS = ("peer-hello", "presence", "relay", "relay-outcome")
# Version 3's kinds and variants: this codec speaks version 2, so it refuses each of them
# (an unknown kind, or an unknown variant inside a body it knows).
VERSION_3_DUMPS = (
    "submit3",
    "push3",
    "relay3",
    "register3",
    "welcome3",
    "presence3",
    "peer-hello3",
    "subscribe",
    "event",
    "subscription-ended",
    "status-document",
    "farewell",
    "relay-ack",
    "resume",
    "resumed",
    "pool-settings",
    "served-outcome-no-worker3",
    "served-outcome-unsupported",
    "register-refused-unsupported",
    "error-unsupported",
)

VERSION_4_DUMPS = (
    "welcome4",
    "features",
    "peer-hello4",
    "submit3-heartbeat",
    "session",
    "resume-session",
    "session-resumed",
    "progress",
    "served-outcome-heartbeat-timeout",
    "served-outcome-role-not-granted",
    "register-refused-session-unknown",
)


@unittest.skipUnless(PROTOCOL_MD.exists(), "wire/PROTOCOL.md not found")
class ProtocolDocDumps(unittest.TestCase):
    def test_every_client_dump_decodes_to_the_stated_value_and_back(self):
        for name, expected in EXPECTED.items():
            with self.subTest(name):
                frame = dump(name)
                (length,) = struct.unpack(">I", frame[:4])
                self.assertEqual(length, len(frame) - 4)
                self.assertEqual(w.decode_body(frame[4:]), expected)
                self.assertEqual(w.encode_frame(expected), frame)

    def test_the_cluster_status_dump_decodes(self):
        frame = dump("cluster-status")
        status = w.decode_body(frame[4:])
        counters = {name: 0 for name in w.COUNTER_NAMES}
        node = w.NodeStatus("node-a", 60000, 3, False, [], [], counters)
        peer = w.PeerStatus(
            "node-b", "10.0.0.2:7400", "Up", True, 12, 4, 1, ["aion.dispatch.remote.gpu"]
        )
        self.assertEqual(status, w.ClusterStatus(9, node, [peer], 0))

    def test_peer_link_frames_are_known_but_unexpected(self):
        for name in PEER_LINK_DUMPS:
            with self.subTest(name):
                with self.assertRaises(w.UnexpectedFrame):
                    w.decode_body(dump(name)[4:])

    def test_later_versions_frames_and_variants_are_refused_by_a_version_2_codec(self):
        for name in VERSION_3_DUMPS + VERSION_4_DUMPS:
            with self.subTest(name):
                with self.assertRaises((w.UnknownKind, w.Malformed)):
                    w.decode_body(dump(name)[4:])

    def test_the_varint_table(self):
        table = doc_blocks("text")["varints"].splitlines()[1:]
        self.assertTrue(table)
        for line in table:
            value, kind, *hex_bytes = line.split()
            bits = int(kind[1:])
            encoded = bytes.fromhex("".join(hex_bytes))
            with self.subTest(line.strip()):
                self.assertEqual(w.encode_varint(int(value), bits), encoded)
                reader = w.Reader(encoded)
                self.assertEqual(reader.varint(bits), int(value))
                reader.finish()

    def test_every_dump_is_covered(self):
        covered = (
            set(EXPECTED)
            | set(PEER_LINK_DUMPS)
            | set(VERSION_3_DUMPS)
            | set(VERSION_4_DUMPS)
            | {"cluster-status"}
        )
        self.assertEqual(set(HEX) - covered, set())


class BadInput(unittest.TestCase):
    def test_partial_input_is_none_and_frames_reassemble_byte_by_byte(self):
        first = w.encode_frame(w.Ping(7))
        stream = first + w.encode_frame(w.Pong(8))
        decoder = w.FrameDecoder()
        frames = []
        for at, byte in enumerate(stream):
            decoder.feed(bytes([byte]))
            frame = decoder.next_frame()
            if at + 1 in (len(first), len(stream)):
                frames.append(frame)
            else:
                self.assertIsNone(frame, f"a frame after {at + 1} bytes")
        self.assertEqual(frames, [w.Ping(7), w.Pong(8)])
        self.assertTrue(decoder.at_frame_boundary())

    def test_an_oversize_length_is_refused_before_the_body_arrives(self):
        decoder = w.FrameDecoder(max_len=16)
        decoder.feed(struct.pack(">I", 17))
        with self.assertRaises(w.Oversize):
            decoder.next_frame()

    def test_an_empty_body_and_bad_kinds(self):
        decoder = w.FrameDecoder()
        decoder.feed(struct.pack(">I", 0))
        with self.assertRaises(w.MissingKind):
            decoder.next_frame()
        with self.assertRaises(w.MissingKind):
            w.decode_body(bytes([0x8C, 0x00]))  # kind 12, not canonical
        with self.assertRaises(w.MissingKind):
            w.decode_body(bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x1F]))  # above u32::MAX
        with self.assertRaises(w.UnknownKind):
            w.decode_body(bytes([26]))
        with self.assertRaises(w.UnexpectedFrame):
            w.decode_body(w.encode_body(w.ServedOutcome(1, "n", w.Cancelled())), version=1)

    def test_malformed_bodies(self):
        ping = w.encode_body(w.Ping(300))
        failure = w.encode_body(w.Reply(1, w.DispatchResponse("a", 1, None, w.Failure("m"))))
        push = w.encode_body(w.Push(1, R))
        node_tag = push.index(b"render") + len(b"render")  # request.node's option tag
        cases = {
            "cut short": ping[:-1],
            "trailing bytes": ping + b"\x00",
            "bool byte 2": failure[:-1] + b"\x02",
            "option tag 2": push[:node_tag] + b"\x02" + push[node_tag + 1 :],
            "u16 overflow": bytes([0, 0xFF, 0xFF, 0x04]),
            "string longer than the body": bytes([16, 0x05]) + b"abc",
            "invalid utf-8": bytes([16, 0x02, 0xC3, 0x28]),
            "unknown error code": bytes([17, 0x09, 0x00]),
            "version-2 result on version 1": w.encode_body(w.Outcome(1, w.ShutDown(5))),
        }
        for name, body in cases.items():
            with self.subTest(name):
                with self.assertRaises(w.Malformed):
                    w.decode_body(body, version=1)

    def test_values_outside_their_type_are_not_encoded(self):
        with self.assertRaises(ValueError):
            w.encode_frame(w.Register(["ns"], ["a"], 1 << 32))
        with self.assertRaises(w.Oversize):
            w.encode_frame(w.Goodbye("x" * 100), max_len=50)

    def test_every_result_variant_round_trips(self):
        census = w.Census("PoolEmpty", 0, 0, 0, 0, 0, 12)
        results = [
            w.Completed(w.DispatchResponse("wf", 1, None, w.Failure("boom", True))),
            w.NoWorker(census),
            w.WorkerLost(3),
            w.Timeout(3, 250),
            w.RefusedDispatch("NamespaceNotGranted", "no"),
            w.Cancelled(),
            w.Draining(),
            w.PeerLost("b", 1),
            w.ShutDown(9),
        ]
        for result in results:
            with self.subTest(result.label):
                frame = w.ServedOutcome(77, "node", result)
                self.assertEqual(w.decode_body(w.encode_body(frame)), frame)


if __name__ == "__main__":
    unittest.main(verbosity=1)
