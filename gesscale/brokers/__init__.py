"""Broker management: the embedded Kafka-compatible broker and Debian's mosquitto, started from code or CLI.

    with start_kafka(19092, Path("out/kafka")) as kafka:
        produce_to(kafka.bootstrap)

Everything else in the toolkit takes a bootstrap address, so a real Kafka is used by passing its address.
"""

from gesscale.brokers.kafka import DEFAULT_KAFKA_IMPL, KAFKA_IMPLS, KafkaBroker, start_kafka
from gesscale.brokers.mqtt import MqttBroker, start_mosquitto

__all__ = ["DEFAULT_KAFKA_IMPL", "KAFKA_IMPLS", "KafkaBroker", "MqttBroker", "start_kafka", "start_mosquitto"]
