package producer

import "fmt"

// Kafka's constants and defaults that the producer state depends on.
const (
	// NoProducerID marks a batch from a producer without idempotence
	// (RecordBatch.NO_PRODUCER_ID): it skips every check.
	NoProducerID int64 = -1
	// BatchesRetained is how many of a producer's latest batches are kept
	// to recognise retries (ProducerStateEntry.NUM_BATCHES_TO_RETAIN). It
	// matches the clients' max.in.flight.requests.per.connection of 5.
	BatchesRetained = 5
	// DefaultExpirationMs is producer.id.expiration.ms's default, one day
	// (KIP-854). transactional.id.expiration.ms (7 days) governs
	// transactional ids, which Strand does not implement.
	DefaultExpirationMs int64 = 24 * 60 * 60 * 1000
	// DefaultExpirationCheckIntervalMs is
	// producer.id.expiration.check.interval.ms's default: how often the
	// broker should call ExpireProducers.
	DefaultExpirationCheckIntervalMs int64 = 10 * 60 * 1000
	// DefaultProducersMax is strand.producer.ids.per.partition.max's
	// default. Kafka has no such bound; it keeps a partition's memory
	// bounded (about 400 bytes per producer).
	DefaultProducersMax = 100_000
)

// BugDedupOff is the name of the planted bug that turns deduplication off.
const BugDedupOff = "dedup-off"

// Config configures one partition's State. It travels with the State, never
// in a global, so that simulated nodes in parallel goroutines differ freely.
type Config struct {
	// ExpirationMs is producer.id.expiration.ms: a producer whose last
	// batch timestamp is at least this old is forgotten by ExpireProducers.
	// Must be positive.
	ExpirationMs int64
	// ProducersMax bounds the producer ids a partition keeps. Must be
	// positive.
	ProducersMax int
	// DedupOff is the planted bug BugDedupOff: Check answers Append for a
	// retry of a retained batch, so that the retry is appended again. Only
	// the simulator's planted-bug runs set it.
	DedupOff bool
}

// DefaultConfig is Kafka's defaults and Strand's bound, with no bug.
func DefaultConfig() Config {
	return Config{ExpirationMs: DefaultExpirationMs, ProducersMax: DefaultProducersMax}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.ExpirationMs <= 0:
		return fmt.Errorf("producer state config: producer.id.expiration.ms %d must be positive", c.ExpirationMs)
	case c.ProducersMax <= 0:
		return fmt.Errorf("producer state config: producer ids per partition max %d must be positive", c.ProducersMax)
	}
	return nil
}
