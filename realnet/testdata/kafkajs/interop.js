// kafkajs against a running Strand cluster (realnet/kafkajs_test.go runs it).
//
// Usage: node interop.js BOOTSTRAP TOPIC RECORDS CODEC REPLICATION_FACTOR
//
// It creates TOPIC (3 partitions), checks the cluster and topic metadata,
// produces RECORDS keyed records with an idempotent acks=all producer and
// the codec (none, gzip or snappy), works out each record's offset from the
// base offsets the broker acknowledged, consumes them all back in a consumer
// group, checking each against what its offset's acknowledgement promised,
// commits, and reads the committed offsets back. Any mismatch exits 1 with
// the reason; on success it prints one line, "RESULT {json}", whose counts
// the Go test checks again.

'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')

const [bootstrap, topic, recordsArg, codecName, rfArg] = process.argv.slice(2)
const records = Number(recordsArg)
const replicationFactor = Number(rfArg)
const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }
const partitions = 3
const sendBatchRecords = 500

function fail (why) {
  console.error('FAIL: ' + why)
  process.exit(1)
}

async function checkMetadata (admin) {
  const cluster = await admin.describeCluster()
  if (cluster.brokers.length < replicationFactor || cluster.controller === null || cluster.controller < 0 || !cluster.clusterId) {
    fail(`describeCluster: ${JSON.stringify(cluster)}`)
  }
  const created = await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor }] })
  if (created !== true) fail(`createTopics ${topic}: not created`)
  const meta = await admin.fetchTopicMetadata({ topics: [topic] })
  const parts = meta.topics[0].partitions
  if (parts.length !== partitions) fail(`metadata: ${parts.length} partitions, want ${partitions}`)
  for (const p of parts) {
    if (p.leader < 0 || p.replicas.length !== replicationFactor || p.isr.length !== replicationFactor) {
      fail(`metadata: partition ${JSON.stringify(p)}`)
    }
  }
  return cluster.brokers.length
}

// produce sends the records in batches and returns, per partition, a map
// from offset to the record its acknowledgement covers.
async function produce (kafka) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const acked = new Map()
  for (let i = 0; i < records; i += sendBatchRecords) {
    const messages = []
    for (let j = i; j < Math.min(records, i + sendBatchRecords); j++) {
      messages.push({ key: `key-${j}`, value: `value-${j}-${'abcdefghij'.repeat(1 + j % 7)}` })
    }
    // kafkajs's default partitioner is murmur2 of the key, as Java's: the
    // broker's answer tells where each partition's share went.
    const byPartition = new Map()
    const answers = await producer.send({ topic, acks: -1, compression: codecs[codecName], messages })
    for (const m of messages) {
      const p = murmur2Partition(m.key)
      if (!byPartition.has(p)) byPartition.set(p, [])
      byPartition.get(p).push(m)
    }
    for (const a of answers) {
      if (a.errorCode !== 0) fail(`produce: partition ${a.partition} error ${a.errorCode}`)
      const sent = byPartition.get(a.partition)
      if (!sent) fail(`produce: acknowledged partition ${a.partition}, to which no record of the batch went`)
      if (!acked.has(a.partition)) acked.set(a.partition, new Map())
      sent.forEach((m, k) => acked.get(a.partition).set(BigInt(a.baseOffset) + BigInt(k), m))
      byPartition.delete(a.partition)
    }
    if (byPartition.size !== 0) fail(`produce: no acknowledgement for partitions ${[...byPartition.keys()]}`)
  }
  await producer.disconnect()
  return acked
}

// murmur2Partition is kafkajs's (and Java's) default partition of a key.
const { Partitioners } = require('kafkajs')
const defaultPartitioner = Partitioners.DefaultPartitioner()
function murmur2Partition (key) {
  const partitionMetadata = [...Array(partitions).keys()].map(i => ({ partitionId: i, leader: 0 }))
  return defaultPartitioner({ topic, partitionMetadata, message: { key } })
}

async function consume (kafka, acked, groupId) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = new Set()
  const last = new Map()
  let done
  const finished = new Promise(resolve => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = BigInt(message.offset)
      const want = acked.get(partition) && acked.get(partition).get(offset)
      const where = `partition ${partition} offset ${offset}`
      if (!want) fail(`consumed ${where}, which no acknowledgement reported`)
      if (seen.has(where)) fail(`consumed ${where} twice`)
      if (last.has(partition) && last.get(partition) >= offset) fail(`consumed ${where} after offset ${last.get(partition)}`)
      if (message.key.toString() !== want.key || message.value.toString() !== want.value) {
        fail(`${where}: consumed ${message.key}=${message.value}, produced ${want.key}=${want.value}`)
      }
      seen.add(where)
      last.set(partition, offset)
      if (seen.size === records) done()
    }
  })
  await finished
  const commits = [...last.entries()].map(([partition, offset]) => ({ topic, partition, offset: String(offset + 1n) }))
  await consumer.commitOffsets(commits)
  await consumer.disconnect()
  return { consumed: seen.size, last }
}

async function main () {
  if (!(codecName in codecs)) fail(`unknown codec ${codecName}`)
  const kafka = new Kafka({ clientId: 'strand-kafkajs-interop', brokers: bootstrap.split(','), logLevel: logLevel.ERROR })
  const admin = kafka.admin()
  await admin.connect()
  const brokers = await checkMetadata(admin)
  const acked = await produce(kafka)
  let ackedCount = 0
  for (const m of acked.values()) ackedCount += m.size
  if (ackedCount !== records) fail(`produce: ${ackedCount} records acknowledged, want ${records}`)

  const groupId = `${topic}-group`
  const { consumed, last } = await consume(kafka, acked, groupId)
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  const highs = await admin.fetchTopicOffsets(topic)
  for (const p of committed[0].partitions) {
    const high = highs.find(h => h.partition === p.partition).high
    const want = last.has(p.partition) ? String(last.get(p.partition) + 1n) : '-1'
    if (p.offset !== want || (last.has(p.partition) && p.offset !== high)) {
      fail(`partition ${p.partition}: committed ${p.offset}, want ${want} (high watermark ${high})`)
    }
  }
  await admin.deleteTopics({ topics: [topic] })
  await admin.disconnect()
  console.log('RESULT ' + JSON.stringify({ brokers, produced: ackedCount, consumed, partitions: acked.size }))
}

main().catch(e => fail(e && e.stack ? e.stack : String(e)))
