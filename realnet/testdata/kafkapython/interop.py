"""Drives a Strand cluster with kafka-python (Debian's python3-kafka 2.0.2),
unchanged, and checks every answer itself. realnet/kafkapython_test.go runs
it and checks the summary line again.

usage: interop.py BOOTSTRAP TOPIC RECORDS CODEC REPLICATION_FACTOR
CODEC is none, gzip, snappy, lz4 or zstd. On success the last line is
RESULT {"brokers": ..., "produced": ..., "consumed": ..., "partitions": ...}.
"""

import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

PARTITIONS = 3


def fail(what):
    print("FAIL " + what, flush=True)
    sys.exit(1)


def check(ok, what):
    if not ok:
        fail(what)


def main():
    bootstrap, topic, records, codec, rf = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    group = topic + "-group"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-admin", request_timeout_ms=30000)

    cluster = admin.describe_cluster()
    brokers = cluster["brokers"]
    check(len(brokers) == rf, "describe_cluster names %d brokers, want %d: %r" % (len(brokers), rf, cluster))
    check(cluster["controller_id"] in [b["node_id"] for b in brokers], "controller %r is not a broker" % cluster["controller_id"])

    admin.create_topics([NewTopic(topic, PARTITIONS, rf)], timeout_ms=30000)
    described = admin.describe_topics([topic])
    check(len(described) == 1 and described[0]["error_code"] == 0, "describe_topics: %r" % described)
    parts = described[0]["partitions"]
    check(len(parts) == PARTITIONS, "%d partitions, want %d" % (len(parts), PARTITIONS))
    for p in parts:
        check(len(p["replicas"]) == rf and sorted(p["isr"]) == sorted(p["replicas"]), "partition %r: replicas or ISR wrong" % p)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    names = {entry[0] for resource in configs[0].resources for entry in resource[4]}
    check("retention.ms" in names and "cleanup.policy" in names, "describe_configs of the topic lacks retention.ms or cleanup.policy")

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="interop-producer", acks="all",
                             compression_type=None if codec == "none" else codec, retries=5, linger_ms=5)
    sent = []
    for i in range(records):
        key, value = b"key-%d" % (i % 97), b"value-%d-%s" % (i, codec.encode())
        sent.append((key, value, producer.send(topic, key=key, value=value)))
    producer.flush(timeout=60)
    at = {}  # (partition, offset) -> (key, value)
    partition_of_key = {}
    for key, value, future in sent:
        md = future.get(timeout=60)
        check((md.partition, md.offset) not in at, "two records acknowledged at %d/%d" % (md.partition, md.offset))
        at[(md.partition, md.offset)] = (key, value)
        # The default partitioner is murmur2, Java's: one key, one partition.
        check(partition_of_key.setdefault(key, md.partition) == md.partition, "key %r went to two partitions" % key)
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id="interop-consumer", group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=20000)
    consumed = 0
    last = {}
    deadline = time.time() + 120
    while consumed < records and time.time() < deadline:
        for message in consumer:
            want = at.get((message.partition, message.offset))
            check(want is not None, "consumed %d/%d, which no acknowledgement named" % (message.partition, message.offset))
            check((message.key, message.value) == want, "%d/%d: got %r, want %r" % (message.partition, message.offset, (message.key, message.value), want))
            check(message.offset > last.get(message.partition, -1), "%d/%d out of order" % (message.partition, message.offset))
            last[message.partition] = message.offset
            consumed += 1
            if consumed == records:
                break
    check(consumed == records, "consumed %d of %d" % (consumed, records))
    consumer.commit()
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends = consumer.end_offsets(tps)
    consumer.close()

    committed = admin.list_consumer_group_offsets(group)
    for tp in tps:
        check(committed[tp].offset == ends[tp], "committed %r for %r, want the end %d" % (committed.get(tp), tp, ends[tp]))
    check(sum(ends.values()) == records, "end offsets %r sum to %d, want %d" % (ends, sum(ends.values()), records))
    groups = [g[0] for g in admin.list_consumer_groups()]
    check(group in groups, "list_consumer_groups lacks %s: %r" % (group, groups))
    state = admin.describe_consumer_groups([group])[0]
    check(state.group == group and state.state == "Empty", "describe_consumer_groups: %r" % (state,))

    admin.delete_topics([topic], timeout_ms=30000)
    admin.close()
    print("RESULT " + json.dumps({"brokers": len(brokers), "produced": len(at), "consumed": consumed, "partitions": len(last)}), flush=True)


if __name__ == "__main__":
    main()
