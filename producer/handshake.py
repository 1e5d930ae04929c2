"""The producer's question to the bridges: "is someone subscribed to my topic right now?" (over MQTT itself).

After a broker restart a publication that reaches mosquitto before the bridge has subscribed again is
acknowledged and dropped (nobody subscribed). So before publishing again the producer asks: it publishes a ping
on `PING_TOPIC` naming its data topic and a reply topic; every bridge subscribes to `PING_TOPIC` in the same
SUBSCRIBE packet as its data filters (mosquitto applies a packet's filters together), and answers on the reply
topic when one of its filters matches the data topic. A pong thus proves that a bridge holds a subscription
covering the producer's topic at that moment.
"""

from __future__ import annotations

import json

PING_TOPIC = "gesscale/bridge/ping"


def pong_topic(client_id: str) -> str:
    """Where the bridges answer the producer with this MQTT client id."""
    return f"gesscale/bridge/pong/{client_id}"


def ping_payload(topic: str, reply: str, nonce: int) -> bytes:
    """The ping a producer publishes: its data topic, where to answer, and a number to recognise the answer."""
    return json.dumps({"topic": topic, "reply": reply, "nonce": nonce}).encode()


def parse_ping(payload: bytes) -> tuple[str, str, int] | None:
    """(data topic, reply topic, nonce) of a ping, or None when it is not one."""
    try:
        data = json.loads(payload)
        topic, reply, nonce = data["topic"], data["reply"], int(data["nonce"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(topic, str) or not isinstance(reply, str) or not reply.startswith(pong_topic("")):
        return None
    return topic, reply, nonce


def pong_payload(nonce: int, bridge: str) -> bytes:
    """A bridge's answer to the ping `nonce`."""
    return json.dumps({"nonce": nonce, "bridge": bridge}).encode()


def parse_pong(payload: bytes) -> int | None:
    """The nonce a pong answers, or None."""
    try:
        return int(json.loads(payload)["nonce"])
    except (ValueError, KeyError, TypeError):
        return None
