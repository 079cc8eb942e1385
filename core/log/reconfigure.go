package log

import "fmt"

// SetConfig replaces the log's configuration, as Kafka's UnifiedLog.updateConfig
// does when a topic's configs change (AlterConfigs). Settings read per
// append, per flush and per retention or cleaning pass apply from the next
// one; sizes fixed when a segment is created (segment.index.bytes,
// index.interval.bytes) apply from the next roll, and the active segment
// keeps its own. An invalid configuration is refused and the old one kept.
func (l *Log) SetConfig(c Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("log %s: %w", l.dir, err)
	}
	l.cfg = c
	return nil
}
