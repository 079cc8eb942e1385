package metadata

import "fmt"

// BootstrapFileName is the file, beside the metadata log in the first log
// directory, that `strand format --add-scram` writes, as kafka-storage.sh
// format writes bootstrap.checkpoint (KIP-900): the records the first
// active controller of a new cluster appends before anything else, so that
// nodes can authenticate to each other with SCRAM from their first start.
const BootstrapFileName = "bootstrap.checkpoint"

// EncodeBootstrap encodes bootstrap records as one RecordBatch v2.
func EncodeBootstrap(records []Record) []byte { return EncodeBatch(records, 0) }

// DecodeBootstrap decodes a bootstrap file. It holds SCRAM credentials
// only (Strand's sole bootstrap records), which must apply, in order, to
// an empty image: the controller appends them without another check.
func DecodeBootstrap(data []byte) ([]Record, error) {
	batches, err := DecodeBatches(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BootstrapFileName, err)
	}
	var records []Record
	im := NewImage()
	for _, b := range batches {
		for _, rec := range b.Records {
			if _, ok := rec.(*UserScramCredentialRecord); !ok {
				return nil, fmt.Errorf("%s: record %d is a %v: only UserScramCredentialRecords bootstrap a cluster", BootstrapFileName, len(records), rec.Type())
			}
			if err := im.Apply(int64(len(records)), rec); err != nil {
				return nil, fmt.Errorf("%s: %w", BootstrapFileName, err)
			}
			records = append(records, rec)
		}
	}
	return records, nil
}

// Empty reports whether the image holds no state at all: no broker, topic,
// config, credential, ACL or producer id block; only quorum leader changes
// (NoOpRecords) may have been applied. The first active controller of a
// new cluster finds it so and appends the bootstrap records. Once a broker
// has registered the image is never empty again: no controller decision
// unregisters a broker.
func (im *Image) Empty() bool {
	return len(im.brokers) == 0 && len(im.topics) == 0 && len(im.configs) == 0 && im.scram.Len() == 0 && len(im.acls) == 0 &&
		im.nextProducerID == 0
}
